#include "sim/metrics/sort_doubles.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <memory>

namespace kvsim {

namespace {

constexpr int kDigitBits = 11;  // 2,048 counters a pass (16 KiB): they stay in cache
constexpr int kPasses = (64 + kDigitBits - 1) / kDigitBits;
constexpr uint64_t kDigitMask = (uint64_t{1} << kDigitBits) - 1;
constexpr uint64_t kPositiveInfinityBits = 0x7FF0000000000000;
// Below this many samples comparison sorting is as fast.
constexpr size_t kRadixMinSize = 1024;

}  // namespace

void sort_doubles(std::vector<double>& v) {
  const size_t n = v.size();
  if (n < kRadixMinSize) return std::sort(v.begin(), v.end());
  // One counter array per pass, all filled in a single read of the samples.
  std::vector<std::array<size_t, kDigitMask + 1>> counts(kPasses);
  for (auto& c : counts) c.fill(0);
  for (size_t i = 0; i < n; ++i) {
    const auto bits = std::bit_cast<uint64_t>(v[i]);
    if (bits > kPositiveInfinityBits) return std::sort(v.begin(), v.end());  // sign bit or NaN
    for (int p = 0; p < kPasses; ++p) ++counts[p][(bits >> (p * kDigitBits)) & kDigitMask];
  }
  // Least significant digit first; each pass is a stable counting sort between the samples'
  // own storage and one scratch buffer (keys read and written as their bits: a double's order
  // is its bits' order here). The scratch is left uninitialized: every pass writes all of it.
  // A pass whose digit is the same for every key moves nothing and is skipped.
  const std::unique_ptr<uint64_t[]> scratch(new uint64_t[n]);
  double* const samples = v.data();
  bool in_scratch = false;
  const uint64_t any_key = std::bit_cast<uint64_t>(v[0]);
  for (int p = 0; p < kPasses; ++p) {
    auto& c = counts[p];
    const int shift = p * kDigitBits;
    if (c[(any_key >> shift) & kDigitMask] == n) continue;
    size_t start = 0;
    for (size_t& count : c) {
      const size_t k = count;
      count = start;
      start += k;
    }
    if (in_scratch) {
      for (size_t i = 0; i < n; ++i) {
        const uint64_t key = scratch[i];
        samples[c[(key >> shift) & kDigitMask]++] = std::bit_cast<double>(key);
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        const auto key = std::bit_cast<uint64_t>(samples[i]);
        scratch[c[(key >> shift) & kDigitMask]++] = key;
      }
    }
    in_scratch = !in_scratch;
  }
  if (in_scratch) {
    for (size_t i = 0; i < n; ++i) samples[i] = std::bit_cast<double>(scratch[i]);
  }
}

}  // namespace kvsim
