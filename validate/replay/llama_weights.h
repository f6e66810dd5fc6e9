// The weights and inputs of the replay's forward pass: a Llama-shaped decoder (RMSNorm, fused QKV
// projection, rotary embeddings, SwiGLU MLP; vLLM's vllm/model_executor/models/llama.py) with
// random float32 values drawn from a seed, so no checkpoint is downloaded and a run is the same
// on every machine. Matrices are stored as nn.Linear stores them: W [out, in], row-major.
#pragma once

#include <cstdint>
#include <vector>

#include "models/model_spec.h"

namespace kvsim::validate {

// RMSNorm's epsilon and the rotary base of Llama 2 (vLLM reads both from the checkpoint's
// config.json: rms_norm_eps, rope_theta).
inline constexpr double kRmsNormEps = 1e-5;
inline constexpr double kRopeTheta = 10000.0;

struct LlamaLayerWeights {
  std::vector<float> attn_norm;  // [hidden]
  std::vector<float> wqkv;       // [(heads + 2 kv_heads) head_dim, hidden]: Q rows, K rows, V rows
  std::vector<float> wo;         // [hidden, heads head_dim]
  std::vector<float> mlp_norm;   // [hidden]
  std::vector<float> w_gate_up;  // [2 ffn, hidden]: gate rows, then up rows
  std::vector<float> w_down;     // [hidden, ffn]
};

struct LlamaWeights {
  std::vector<float> embed;  // [vocab, hidden]
  std::vector<LlamaLayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab, hidden]; empty when tied to `embed`
  const std::vector<float>& lm_head_or_embed() const { return lm_head.empty() ? embed : lm_head; }
};

// Throws InputError when the model is not one this forward pass runs (mixture of experts, an
// ungated MLP, a sliding window) or the weights exceed `max_bytes`.
void check_llama_shaped(const ModelSpec& m, int64_t max_bytes);

// Linear weights uniform with standard deviation 0.02 (the usual initializer_range), norm
// weights uniform in [0.9, 1.1] (not all ones, so a norm applied with the wrong weight shows).
LlamaWeights random_llama_weights(const ModelSpec& m, uint64_t seed);

// The token at `position` of request `request_id`: the same id every time the position is
// computed (a re-prefill after preemption sees the same prompt), in [0, vocab).
int32_t replay_token_id(uint64_t seed, int64_t request_id, int64_t position, int vocab);

}  // namespace kvsim::validate
