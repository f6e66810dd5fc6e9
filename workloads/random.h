// Rng: the one source of randomness for workloads. std::mt19937_64 is specified bit for bit by
// the standard, but std::*_distribution are not (libstdc++ and libc++ draw differently), so every
// distribution here is hand-written on top of the raw 64-bit draws: the same seed gives the same
// stream with any standard library.
#pragma once

#include <cstdint>
#include <random>

namespace kvsim {

// SplitMix64 finaliser: a well-mixed seed for sub-stream `stream` of `seed`, so arrivals, prompt
// lengths, output lengths, each burst and each client draw from independent streams (changing
// the rate does not change the lengths).
uint64_t derive_seed(uint64_t seed, uint64_t stream);

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  uint64_t raw() { return engine_(); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform01() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform integer in [lo, hi]. Requires: lo <= hi. Unbiased (rejection on the top range).
  int64_t uniform_int(int64_t lo, int64_t hi);
  // Exponential with the given mean, by inverse CDF: -mean * ln(1 - U).
  double exponential(double mean);
  // Standard normal, by Marsaglia's polar method (keeps the spare draw).
  double normal();
  // Gamma(shape, scale 1), by Marsaglia and Tsang (2000); shape < 1 via the boost
  // Gamma(shape + 1) * U^(1/shape). Requires: shape > 0.
  double gamma(double shape);

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace kvsim
