// The CUDA forward pass (cuda_forward.cu) as its tests see it: the clock plus the logits of the
// last iteration, and the functions that say which weights and token ids it runs with, so a test
// can recompute the same forward pass on the host (tests/replay_cuda/cuda_forward_test.cc).
// Host code includes this header without CUDA; nvcc compiles the same inline functions for the
// device (KVSIM_HD), so host and device draw bit-identical weights and tokens.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "models/model_spec.h"
#include "validate/replay/forward_pass.h"

#ifdef __CUDACC__
#define KVSIM_HD __host__ __device__
#else
#define KVSIM_HD
#endif

namespace kvsim::validate {

// The weight tensors of the Llama-shaped model, row-major [out, in] (a linear layer's W in
// Y = X W^T, kernels/cpu_ref/shapes.h). Per layer: attn_norm [hidden], wqkv [(H + 2 Hkv) D,
// hidden] (Q rows, then K, then V), wo [hidden, H D], mlp_norm [hidden], w_gate_up [2 F, hidden]
// (gate rows, then up), w_down [hidden, F]. Model-wide: embedding [vocab, hidden], final_norm
// [hidden], lm_head [vocab, hidden] (the embedding itself when tied).
enum class WeightKind : uint32_t {
  kEmbedding = 0,
  kFinalNorm = 1,
  kLmHead = 2,
  kAttnNorm = 3,
  kWqkv = 4,
  kWo = 5,
  kMlpNorm = 6,
  kGateUp = 7,
  kDown = 8,
};

KVSIM_HD inline uint64_t forward_mix(uint64_t z) {  // SplitMix64's finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Each tensor draws from its own stream: (seed, layer, kind). layer is -1 for model-wide ones.
KVSIM_HD inline uint64_t weight_stream(uint64_t seed, int layer, WeightKind kind) {
  return forward_mix(seed ^ forward_mix((static_cast<uint64_t>(layer + 1) << 8) |
                                        static_cast<uint64_t>(kind)));
}

// Element `index` of a tensor before rounding to fp16: offset + scale * u, u uniform in [-1, 1)
// (24 random bits, exact in float).
KVSIM_HD inline float weight_value(uint64_t stream, int64_t index, float offset, float scale) {
  const uint64_t r = forward_mix(stream ^ static_cast<uint64_t>(index) * 0xd1b54a32d192ed03ull);
  const float u = static_cast<float>(r >> 40) * (2.0f / 16777216.0f) - 1.0f;  // exact
#ifdef __CUDA_ARCH__
  return __fadd_rn(offset, __fmul_rn(scale, u));  // no FMA contraction: the host's rounding
#else
  return offset + scale * u;
#endif
}

struct WeightInit {
  float offset = 0;
  float scale = 1;
};

// Norm weights near 1 and linear layers scaled by 1/sqrt(fan_in), so activations and logits stay
// of order one through any depth (random weights; only the arithmetic has to be real).
inline WeightInit weight_init(const ModelSpec& m, WeightKind kind) {
  const auto inv_sqrt = [](int n) { return static_cast<float>(1.0 / std::sqrt(double(n))); };
  switch (kind) {
    case WeightKind::kEmbedding: return {0.0f, 1.0f};
    case WeightKind::kFinalNorm:
    case WeightKind::kAttnNorm:
    case WeightKind::kMlpNorm: return {1.0f, 0.1f};
    case WeightKind::kLmHead:
    case WeightKind::kWqkv:
    case WeightKind::kGateUp: return {0.0f, inv_sqrt(m.hidden)};
    case WeightKind::kWo: return {0.0f, inv_sqrt(m.heads * m.head_dim)};
    case WeightKind::kDown: return {0.0f, inv_sqrt(m.ffn)};
  }
  return {};
}

// The token id at `position` of request `request_id` (prompt and generated tokens alike).
KVSIM_HD inline int32_t forward_token(uint64_t seed, int64_t request_id, int64_t position,
                                      int vocab) {
  const uint64_t r = forward_mix(forward_mix(seed ^ 0x70c3e5ull) ^
                                 static_cast<uint64_t>(request_id) * 0x9e3779b97f4a7c15ull ^
                                 static_cast<uint64_t>(position));
  return static_cast<int32_t>(r % static_cast<uint64_t>(vocab));
}

// RoPE as in Hugging Face's Llama (rotate-half pairs (i, i + D/2)), base 10000: the timing does
// not depend on the base, and every model runs the same arithmetic.
inline constexpr double kRopeBase = 10000.0;
inline constexpr float kRmsEps = 1e-5f;

// The clock make_cuda_forward returns, with the last iteration's logits for tests.
class CudaForward : public IterationClock {
 public:
  // Logits of the last seconds() call's emitting rows, [rows, vocab] row-major, rows in batch
  // order (emitting prefill chunks, then decode sequences); values as the device holds them
  // (fp16), widened to float.
  virtual std::vector<float> last_logits() const = 0;
  // Logical KV blocks handed out beyond the pool (the engine shares prefix blocks the forward
  // pass holds per request): they alias blocks in use, so their values are not that request's.
  virtual int64_t aliased_blocks() const = 0;
};

// Throws InputError as make_cuda_forward does.
std::unique_ptr<CudaForward> make_cuda_forward_pass(const ForwardSetup& setup);

}  // namespace kvsim::validate
