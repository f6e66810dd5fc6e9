#include "validate/replay/llama_weights.h"

#include <fmt/format.h>

#include <cmath>

#include "core/errors.h"
#include "kernels/cpu_ref/random_inputs.h"

namespace kvsim::validate {

namespace {

std::vector<float> uniform_values(kernels::InputRng& rng, int64_t count, float lo, float hi) {
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = rng.uniform(lo, hi);
  return v;
}

// Uniform on [-a, a] has standard deviation a / sqrt(3).
std::vector<float> linear_weight(kernels::InputRng& rng, int64_t out, int64_t in) {
  const float a = 0.02f * std::sqrt(3.0f);
  return uniform_values(rng, out * in, -a, a);
}

int64_t weight_floats(const ModelSpec& m) {
  const int64_t h = m.hidden;
  const int64_t qkv = int64_t{m.heads + 2 * m.kv_heads} * m.head_dim;
  const int64_t layer =
      2 * h + qkv * h + h * int64_t{m.heads} * m.head_dim + 3 * int64_t{m.ffn} * h;
  return int64_t{m.vocab} * h * (m.tied_embeddings ? 1 : 2) + m.layers * layer + h;
}

}  // namespace

void check_llama_shaped(const ModelSpec& m, int64_t max_bytes) {
  const auto refuse = [&](const std::string& why) {
    throw InputError(
        fmt::format("cpu forward: model {} {}; the replay's forward pass runs "
                    "dense Llama-shaped models only",
                    m.name, why));
  };
  if (m.num_experts > 1) refuse(fmt::format("has {} experts", m.num_experts));
  if (!m.gated_mlp) refuse("has an ungated MLP");
  if (m.sliding_window) refuse("uses sliding-window attention");
  if (m.layers < 1 || m.hidden < 1 || m.heads < 1 || m.kv_heads < 1 || m.head_dim < 2 ||
      m.head_dim % 2 != 0 || m.ffn < 1 || m.vocab < 1 || m.heads % m.kv_heads != 0) {
    refuse(
        "has a shape it cannot run (needs positive sizes, an even head_dim and kv_heads "
        "dividing heads)");
  }
  const int64_t bytes = weight_floats(m) * int64_t{sizeof(float)};
  if (bytes > max_bytes) {
    throw InputError(
        fmt::format("cpu forward: model {}'s float32 weights need {} bytes, over "
                    "the {} bytes the CPU forward pass allows",
                    m.name, bytes, max_bytes));
  }
}

LlamaWeights random_llama_weights(const ModelSpec& m, uint64_t seed) {
  kernels::InputRng rng(seed);
  const int64_t h = m.hidden;
  LlamaWeights w;
  w.embed = linear_weight(rng, m.vocab, h);
  w.layers.resize(static_cast<size_t>(m.layers));
  for (LlamaLayerWeights& l : w.layers) {
    l.attn_norm = uniform_values(rng, h, 0.9f, 1.1f);
    l.wqkv = linear_weight(rng, int64_t{m.heads + 2 * m.kv_heads} * m.head_dim, h);
    l.wo = linear_weight(rng, h, int64_t{m.heads} * m.head_dim);
    l.mlp_norm = uniform_values(rng, h, 0.9f, 1.1f);
    l.w_gate_up = linear_weight(rng, 2 * int64_t{m.ffn}, h);
    l.w_down = linear_weight(rng, h, m.ffn);
  }
  w.final_norm = uniform_values(rng, h, 0.9f, 1.1f);
  if (!m.tied_embeddings) w.lm_head = linear_weight(rng, m.vocab, h);
  return w;
}

int32_t replay_token_id(uint64_t seed, int64_t request_id, int64_t position, int vocab) {
  // One SplitMix64 step over a mix of the three, so neighbouring positions are unrelated.
  kernels::InputRng rng(seed ^ (static_cast<uint64_t>(request_id) * 0x9e3779b97f4a7c15ull) ^
                        (static_cast<uint64_t>(position) * 0xc2b2ae3d27d4eb4full));
  return static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(vocab));
}

}  // namespace kvsim::validate
