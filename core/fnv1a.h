// FNV-1a, 64-bit: the one hash kvsim uses to fingerprint text (a resolved scenario's
// `scenario_hash`, the golden tests' digests of result files). Not cryptographic; stable across
// platforms and builds, which is what a fingerprint in a result file needs.
#pragma once

#include <cstdint>
#include <string_view>

namespace kvsim {

// The standard 64-bit offset basis.
inline constexpr uint64_t kFnv1aOffsetBasis = 14695981039346656037ull;

constexpr uint64_t fnv1a64(std::string_view bytes, uint64_t basis = kFnv1aOffsetBasis) {
  uint64_t h = basis;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace kvsim
