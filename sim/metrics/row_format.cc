#include "sim/metrics/row_format.h"

#include <bit>
#include <cmath>
#include <cstring>

#include <fmt/compile.h>
#include <fmt/format.h>

namespace kvsim {

namespace {

// Below 2^22 s the double x = ns / 1e9 lies within half an ulp (<= 2^-32 s, 0.24 ns) of the
// exact ns / 1e9. Rounding to units of u ns (10^3 for 6 decimals, 10^6 for 3), the exact
// value's distance to the nearest tie (a whole unit plus u/2 ns) is a whole number of
// nanoseconds, so when it is not 0 it is at least 1 ns: x rounds as the exact value does, to the
// nearest unit of ns, which fmt's correctly rounded fixed-point output writes. Ties
// (ns % u == u/2) depend on how 1e9 divides in binary, so those, negative times and times past
// this bound go to fmt.
constexpr SimTime kIntegerPathLimitNs = SimTime{4'000'000} * kNsPerSecond;  // < 2^22 s

// "00" .. "99": two digits per division.
constexpr char kDigitPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

// Two digits of v < 100 at q.
inline void put_pair(char* q, uint32_t v) { std::memcpy(q, kDigitPairs + 2 * v, 2); }

// The `digits` lowest decimal digits of v, zero-padded, ending at p + digits. Below 2^32 (every
// fraction, most whole parts) in 32-bit arithmetic, whose divisions by 100 are cheaper.
char* write_digits(char* p, uint64_t v, int digits) {
  char* end = p + digits;
  char* q = end;
  while (v > 0xFFFF'FFFFULL && digits >= 2) {
    put_pair(q -= 2, static_cast<uint32_t>(v % 100));
    v /= 100;
    digits -= 2;
  }
  auto w = static_cast<uint32_t>(v);
  while (digits >= 2) {
    put_pair(q -= 2, w % 100);
    w /= 100;
    digits -= 2;
  }
  if (digits == 1) *--q = static_cast<char>('0' + w % 10);
  return end;
}

// Exactly 9, 6 or 3 digits of v below 10^9, 10^6 or 10^3 (the fraction parts), unrolled.
char* write_9_digits(char* p, uint32_t v) {
  *p = static_cast<char>('0' + v / 100'000'000);
  const uint32_t low = v % 100'000'000;
  const uint32_t a = low / 10'000, b = low % 10'000;
  put_pair(p + 1, a / 100);
  put_pair(p + 3, a % 100);
  put_pair(p + 5, b / 100);
  put_pair(p + 7, b % 100);
  return p + 9;
}
char* write_6_digits(char* p, uint32_t v) {
  const uint32_t a = v / 10'000, b = v % 10'000;
  put_pair(p, a);
  put_pair(p + 2, b / 100);
  put_pair(p + 4, b % 100);
  return p + 6;
}
char* write_3_digits(char* p, uint32_t v) {
  *p = static_cast<char>('0' + v / 100);
  put_pair(p + 1, v % 100);
  return p + 3;
}

// Decimal digits of v (1 for 0), without a loop: floor(log2 v) + 1 times log10(2) (1233 / 4096)
// is floor(log10 v) or one more, which one comparison settles (Anderson's bit hacks).
int digit_count(uint64_t v) {
  static constexpr uint64_t kPowers[20] = {1ULL,
                                           10ULL,
                                           100ULL,
                                           1'000ULL,
                                           10'000ULL,
                                           100'000ULL,
                                           1'000'000ULL,
                                           10'000'000ULL,
                                           100'000'000ULL,
                                           1'000'000'000ULL,
                                           10'000'000'000ULL,
                                           100'000'000'000ULL,
                                           1'000'000'000'000ULL,
                                           10'000'000'000'000ULL,
                                           100'000'000'000'000ULL,
                                           1'000'000'000'000'000ULL,
                                           10'000'000'000'000'000ULL,
                                           100'000'000'000'000'000ULL,
                                           1'000'000'000'000'000'000ULL,
                                           10'000'000'000'000'000'000ULL};
  const uint64_t w = v | 1;
  const int t = ((64 - std::countl_zero(w)) * 1233) >> 12;  // 0..19
  return t + (w >= kPowers[t] ? 1 : 0);
}

char* write_uint(char* p, uint64_t v) {
  // One and two digits (counts of preemptions, dropped tokens, whole seconds) without the count.
  if (v < 10) {
    *p = static_cast<char>('0' + v);
    return p + 1;
  }
  if (v < 100) {
    put_pair(p, static_cast<uint32_t>(v));
    return p + 2;
  }
  return write_digits(p, v, digit_count(v));
}

// fmt's own paths, out of line: the fast paths' callers then need no room for fmt's frame.
[[gnu::noinline]] char* fmt_fixed_6(char* p, double x) {
  return fmt::format_to(p, FMT_COMPILE("{:.6f}"), x);
}
[[gnu::noinline]] char* fmt_fixed_3(char* p, double x) {
  return fmt::format_to(p, FMT_COMPILE("{:.3f}"), x);
}
[[gnu::noinline]] char* fmt_seconds_9(char* p, SimTime ns) {
  return fmt::format_to(p, FMT_COMPILE("{}.{:09d}"), ns / kNsPerSecond, ns % kNsPerSecond);
}

// A count of 10^-decimals units (>= 0) as "<whole>.<decimals digits>".
template <int decimals>
char* write_units(char* p, int64_t units) {
  constexpr int64_t kPerOne = decimals == 6 ? 1'000'000 : 1'000;
  static_assert(decimals == 6 || decimals == 3);
  p = write_uint(p, static_cast<uint64_t>(units / kPerOne));
  *p++ = '.';
  const auto fraction = static_cast<uint32_t>(units % kPerOne);
  return decimals == 6 ? write_6_digits(p, fraction) : write_3_digits(p, fraction);
}

char* write_micros(char* p, int64_t micros) { return write_units<6>(p, micros); }

// sim_to_seconds(ns) as "{:.<decimals>f}" (the bound's comment above).
template <int decimals>
char* write_seconds(char* p, SimTime ns) {
  constexpr SimTime kUnitNs = decimals == 6 ? 1'000 : 1'000'000;
  if (ns < 0 || ns >= kIntegerPathLimitNs || ns % kUnitNs == kUnitNs / 2) {
    const double x = sim_to_seconds(ns);
    return decimals == 6 ? fmt_fixed_6(p, x) : fmt_fixed_3(p, x);
  }
  return write_units<decimals>(p, ns / kUnitNs + (ns % kUnitNs > kUnitNs / 2 ? 1 : 0));
}

}  // namespace

char* write_int(char* p, int64_t v) {
  if (v < 0) {
    *p++ = '-';
    return write_uint(p, 0 - static_cast<uint64_t>(v));  // INT64_MIN included
  }
  return write_uint(p, static_cast<uint64_t>(v));
}

char* write_seconds_9(char* p, SimTime ns) {
  if (ns < 0) {  // never for a breakdown part; fmt's bytes all the same
    return fmt_seconds_9(p, ns);
  }
  p = write_uint(p, static_cast<uint64_t>(ns / kNsPerSecond));
  *p++ = '.';
  return write_9_digits(p, static_cast<uint32_t>(ns % kNsPerSecond));
}

char* write_fixed_6(char* p, double x) {
  // fmt writes the exact value v = x * 10^6 rounded to an integer. y = fl(v) is within
  // y * 2^-53 of v, and below 10^15 its fraction is exact; when that fraction is further than
  // y * 2^-52 from one half, v rounds to the same integer as y does. Otherwise (near a tie),
  // negatives (-0.0 included), NaN and large values: fmt.
  if (!(x >= 0 && x < 1e9) || std::signbit(x)) return fmt_fixed_6(p, x);
  const double y = x * 1e6;
  const double whole = std::floor(y);
  const double fraction = y - whole;
  if (std::fabs(fraction - 0.5) <= y * 0x1p-52) return fmt_fixed_6(p, x);
  return write_micros(p, static_cast<int64_t>(whole) + (fraction > 0.5 ? 1 : 0));
}

char* write_seconds_6(char* p, SimTime ns) { return write_seconds<6>(p, ns); }

char* write_seconds_3(char* p, SimTime ns) { return write_seconds<3>(p, ns); }

}  // namespace kvsim
