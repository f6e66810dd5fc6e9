#include "sim/metrics/sort_doubles.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

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
  std::vector<uint64_t> keys(n), other(n);
  // One counter array per pass, all filled in a single read of the samples.
  std::vector<std::array<size_t, kDigitMask + 1>> counts(kPasses);
  for (auto& c : counts) c.fill(0);
  for (size_t i = 0; i < n; ++i) {
    const auto bits = std::bit_cast<uint64_t>(v[i]);
    if (bits > kPositiveInfinityBits) return std::sort(v.begin(), v.end());  // sign bit or NaN
    keys[i] = bits;
    for (int p = 0; p < kPasses; ++p) ++counts[p][(bits >> (p * kDigitBits)) & kDigitMask];
  }
  // Least significant digit first; each pass is a stable counting sort. A pass whose digit is
  // the same for every key moves nothing and is skipped.
  for (int p = 0; p < kPasses; ++p) {
    auto& c = counts[p];
    const uint64_t first_digit = (keys[0] >> (p * kDigitBits)) & kDigitMask;
    if (c[first_digit] == n) continue;
    size_t start = 0;
    for (size_t& count : c) {
      const size_t k = count;
      count = start;
      start += k;
    }
    for (size_t i = 0; i < n; ++i) {
      const uint64_t key = keys[i];
      other[c[(key >> (p * kDigitBits)) & kDigitMask]++] = key;
    }
    keys.swap(other);
  }
  for (size_t i = 0; i < n; ++i) v[i] = std::bit_cast<double>(keys[i]);
}

}  // namespace kvsim
