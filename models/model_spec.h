// What an LLM is, as far as memory and latency are concerned: its shape and its dtypes.
#pragma once

#include <algorithm>
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
  int ffn = 0;  // intermediate size of a dense layer's MLP (and of each expert unless expert_ffn)
  int vocab = 0;
  int64_t max_position = 0;
  int num_experts = 1;        // >1 for mixture-of-experts
  int experts_per_token = 1;  // top-k routing
  // Mixture of experts beyond Mixtral's (docs/models.md "Mixture of experts"): each routed
  // expert's MLP width (0: ffn, as Mixtral), the always-on shared experts' width in total
  // (DeepSeek's n_shared_experts x moe_intermediate_size, Qwen2-MoE's
  // shared_expert_intermediate_size; 0: none), and the layers (0-based, ascending) whose MLP is a
  // dense one of `ffn` in a MoE model (DeepSeek's first_k_dense_replace, Qwen's mlp_only_layers
  // and decoder_sparse_step, Llama 4's interleave_moe_layer_step).
  int expert_ffn = 0;
  int shared_expert_ffn = 0;
  std::vector<int> dense_layers;
  // Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2; docs/models.md "MLA"): each token keeps
  // one latent of kv_lora_rank plus a shared rotary key of qk_rope_head_dim per layer, not K and
  // V per head. Unset (0): ordinary attention. Then head_dim is the query/key head size
  // (qk_nope_head_dim + qk_rope_head_dim), v_head_dim the value head size, q_lora_rank the
  // queries' low-rank width (0: a full q_proj) and kv_heads 1 (vLLM's one latent "head").
  int kv_lora_rank = 0;
  int q_lora_rank = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  // DeepSeek-V3's multi-token-prediction modules in the checkpoint (num_nextn_predict_layers):
  // counted by mtp_param_count, not loaded by a server that does not speculate with them.
  int mtp_layers = 0;
  // A multimodal checkpoint's vision tower and projector (from config.json's vision_config:
  // hf_families.h vision_tower_params), in 16-bit weights on the first pipeline stage, split
  // over tensor parallelism. vLLM loads them unless images are off (limit_mm_per_prompt
  // image: 0, the engine key): not in param_count(), which is the language model.
  int64_t vision_params = 0;
  bool qkv_bias = false;  // Qwen2 carries biases on Q, K and V
  bool o_bias = false;    // the output projection carries a bias (gpt-oss, Phi-3.5-MoE)
  // One learned logit per query head and layer that every softmax row also normalises over
  // (gpt-oss's attention sinks: `sinks` in vLLM's OAIAttention); parameters only, no KV.
  bool attention_sinks = false;
  // The router and every routed expert's matrices carry biases (gpt-oss: the router's E, and per
  // expert gate/up 2 x expert_ffn and down hidden).
  bool expert_bias = false;
  // Norm weight vectors of `hidden` per decoder layer: 2 (before attention and before the MLP),
  // 4 for Gemma 3 (pre- and post-attention, pre- and post-feedforward).
  int layer_norms = 2;
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
  // Hybrid attention (docs/models.md "Hybrid attention"): some layers attend locally, the rest to
  // the whole context. Gemma 3 and gpt-oss keep a sliding window on their local layers, Llama 4
  // attends within fixed chunks (attention_chunk_size: a query sees the tokens of its own chunk of
  // `size` tokens). Unset: every layer alike (sliding_window, if set, applies to all of them).
  enum class LocalKind { kSlidingWindow, kChunked };
  struct LocalAttention {
    LocalKind kind = LocalKind::kSlidingWindow;
    int size = 0;             // the window or the chunk, in tokens
    std::vector<int> layers;  // the local layers (0-based, ascending); the others are global
  };
  std::optional<LocalAttention> local_attention;
  bool hybrid() const { return local_attention.has_value(); }
  DType weight_dtype = DType::kFp16;  // of the linear layers (GEMMs); may be quantized
  // The quantization's group (docs/memory.md "Quantized weights"): FP8's square block side (0:
  // one scale per tensor; 128: DeepSeek's 128 x 128 blocks, quantization_config
  // weight_block_size), INT4's group of inputs (0: 128, AWQ's default). MXFP4 and NVFP4 have
  // fixed groups (32, 16).
  int weight_group = 0;
  // The routed experts' own weight type where only they are quantized (gpt-oss: MXFP4 experts
  // beside BF16 attention); unset: weight_dtype.
  std::optional<DType> expert_weight_dtype;
  DType routed_weight_dtype() const { return expert_weight_dtype.value_or(weight_dtype); }
  DType kv_dtype = DType::kFp16;
  std::optional<int64_t> weights_bytes_override;  // e.g. the seeds' flat "16 GB of weights"

  // 2 (K and V) x L x H_kv x D x bytes(kv_dtype); MLA: L x (kv_lora_rank + qk_rope_head_dim)
  // x bytes(kv_dtype).
  int64_t kv_bytes_per_token() const;
  // KV elements one token keeps per layer on a GPU holding `kv_heads_per_gpu` KV heads: the
  // latent and rotary key under MLA (not split by heads), else 2 x heads x D.
  int64_t kv_elements_per_layer(int kv_heads_per_gpu) const {
    return mla() ? int64_t{kv_lora_rank} + qk_rope_head_dim
                 : int64_t{2} * kv_heads_per_gpu * head_dim;
  }
  // Parameter count from the shape (embeddings, attention, MLP/experts, norms) of the main model
  // (without MTP modules).
  int64_t param_count() const;
  // Parameters touched per token (MoE: only the routed experts, plus the shared ones).
  int64_t active_param_count() const;
  // Parameters of the MTP modules: each one MoE decoder layer, two input norms, the 2h x h
  // projection, a final norm, and its own embedding and LM head as the checkpoint stores them.
  int64_t mtp_param_count() const;
  bool moe() const { return num_experts > 1; }
  bool mla() const { return kv_lora_rank > 0; }
  // Layer i's MLP holds the routed experts (else a dense MLP of ffn).
  bool is_moe_layer(int i) const {
    return moe() && !std::binary_search(dense_layers.begin(), dense_layers.end(), i);
  }
  // MoE layers among layers [begin, end).
  int moe_layers_in(int begin, int end) const;
  int routed_ffn() const { return expert_ffn > 0 ? expert_ffn : ffn; }
  // The value head size (head_dim but under MLA).
  int value_head_dim() const { return v_head_dim > 0 ? v_head_dim : head_dim; }
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
  // "MHA", "GQA", "MQA" or "MLA".
  std::string attention_kind() const;
};

// Reads a model from a catalog entry or an inline scenario spec. Throws ConfigError.
ModelSpec parse_model_spec(const ConfigNode& node, const std::string& name);

}  // namespace kvsim
