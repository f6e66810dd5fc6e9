// Fixed-seed inputs for kernels: a SplitMix64 stream, so values are the same on every platform and
// standard library (std::uniform_real_distribution is not).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu_ref/precision.h"

namespace kvsim::kernels {

class InputRng {
 public:
  explicit InputRng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi), 24 random bits.
  float uniform(float lo, float hi) {
    const float u = static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * u;
  }
  // Uniform integer in [0, n). Requires: n > 0.
  int64_t below(int64_t n) { return static_cast<int64_t>(next_u64() % static_cast<uint64_t>(n)); }

 private:
  uint64_t state_;
};

// `count` values uniform in [lo, hi), already rounded to `p`.
inline std::vector<float> random_values(InputRng& rng, int64_t count, Precision p, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = round_to(p, rng.uniform(lo, hi));
  return v;
}

}  // namespace kvsim::kernels
