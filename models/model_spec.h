// What an LLM is, as far as memory and latency are concerned: its shape and its dtypes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/dtype.h"

namespace kvsim {

class ConfigNode;

struct ModelSpec {
  std::string name;          // catalog key, lower case, e.g. "llama-3-8b"
  std::string display_name;  // e.g. "Meta-Llama-3-8B"
  std::string source;        // where the figures come from
  int layers = 0;
  int heads = 0;     // query heads H
  int kv_heads = 0;  // H_kv: = H for MHA, H/G for GQA, 1 for MQA
  int head_dim = 0;  // D
  int hidden = 0;
  int ffn = 0;  // intermediate size of one expert's MLP
  int vocab = 0;
  int64_t max_position = 0;
  int num_experts = 1;         // >1 for mixture-of-experts
  int experts_per_token = 1;   // top-k routing
  bool qkv_bias = false;       // Qwen2 carries biases on Q, K and V
  // Per-head RMSNorm on Q and K before rotary (Qwen3: q_norm and k_norm, one head_dim weight
  // each per layer, vLLM's Qwen3Attention in vllm/model_executor/models/qwen3.py).
  bool qk_norm = false;
  bool tied_embeddings = false;
  // The MLP: gate, up and down matrices (SwiGLU: Llama, Mistral, Qwen2, Phi-3), or up and down
  // only (GELU: GPT-NeoX, Phi-2). Weights and parameter counts follow it; the latency and
  // activation models assume the gated form (docs/models.md).
  bool gated_mlp = true;
  // Sliding-window attention: each query attends to the last `sliding_window` tokens (itself
  // included), so a paged store frees the blocks before the window and attention reads at most
  // the window (docs/memory.md "Sliding-window attention"). Unset: full attention.
  std::optional<int> sliding_window;
  DType weight_dtype = DType::kFp16;  // of the linear layers (GEMMs); may be quantized
  DType kv_dtype = DType::kFp16;
  std::optional<int64_t> weights_bytes_override;  // e.g. the seeds' flat "16 GB of weights"

  // 2 (K and V) x L x H_kv x D x bytes(kv_dtype).
  int64_t kv_bytes_per_token() const;
  // Parameter count from the shape (embeddings, attention, MLP/experts, norms).
  int64_t param_count() const;
  // Parameters touched per token (MoE: only the routed experts).
  int64_t active_param_count() const;
  // Weight bytes held on one GPU: the override if given, else params x bytes(weight_dtype) for
  // 16/32-bit weights, or quantized linear layers with their scales (weights_bytes_on_gpu).
  int64_t weights_bytes() const;
  // Features of the model that kvsim does not model, one phrase each saying what that means for
  // the figures (`kvsim check` prints them as lints). Empty when every feature is modelled.
  std::vector<std::string> unmodelled_features() const;
  // KV tokens a query whose sequence holds `context` tokens (its own included) attends to:
  // min(context, sliding_window), or `context` without a window.
  int64_t attended_tokens(int64_t context) const {
    return sliding_window && context > *sliding_window ? int64_t{*sliding_window} : context;
  }
  // "MHA", "GQA" or "MQA".
  std::string attention_kind() const;
};

// Reads a model from a catalog entry or an inline scenario spec. Throws ConfigError.
ModelSpec parse_model_spec(const ConfigNode& node, const std::string& name);

}  // namespace kvsim
