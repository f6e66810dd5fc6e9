// Byte units. kvsim keeps sizes as exact int64 bytes and converts only for display. "GB" is
// decimal (1e9 bytes) and "GiB" binary (2^30 bytes); every printed figure says which.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

namespace kvsim {

inline constexpr int64_t kKiB = int64_t{1} << 10;
inline constexpr int64_t kMiB = int64_t{1} << 20;
inline constexpr int64_t kGiB = int64_t{1} << 30;
inline constexpr int64_t kGB = 1'000'000'000;

inline double to_gb(int64_t bytes) { return static_cast<double>(bytes) / 1e9; }
inline double to_gib(int64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(kGiB);
}

// Decimal gigabytes from a user figure, rounded to the nearest byte. Requires: finite, |gb| < 9e9.
inline int64_t gb_to_bytes(double gb) { return static_cast<int64_t>(std::llround(gb * 1e9)); }
inline int64_t gib_to_bytes(double gib) {
  return static_cast<int64_t>(std::llround(gib * static_cast<double>(kGiB)));
}

// Checked arithmetic for byte and token counts: nullopt instead of silent wrap-around.
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace kvsim
