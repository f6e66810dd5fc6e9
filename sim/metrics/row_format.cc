#include "sim/metrics/row_format.h"

#include <cmath>

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

// The `digits` lowest decimal digits of v, zero-padded, ending at p + digits.
char* write_digits(char* p, uint64_t v, int digits) {
  char* end = p + digits;
  char* q = end;
  while (digits >= 2) {
    const char* pair = kDigitPairs + 2 * (v % 100);
    v /= 100;
    *--q = pair[1];
    *--q = pair[0];
    digits -= 2;
  }
  if (digits == 1) *--q = static_cast<char>('0' + v % 10);
  return end;
}

// Decimal digits of v: comparisons against powers of ten (cells are mostly short numbers).
int digit_count(uint64_t v) {
  uint64_t limit = 10;
  for (int n = 1; n < 20; ++n, limit *= 10) {
    if (v < limit) return n;
  }
  return 20;
}

char* write_uint(char* p, uint64_t v) { return write_digits(p, v, digit_count(v)); }

char* fmt_fixed_6(char* p, double x) { return fmt::format_to(p, FMT_COMPILE("{:.6f}"), x); }

// A count of 10^-decimals units (>= 0) as "<whole>.<decimals digits>".
template <int decimals>
char* write_units(char* p, int64_t units) {
  constexpr int64_t kPerOne = decimals == 6 ? 1'000'000 : 1'000;
  static_assert(decimals == 6 || decimals == 3);
  p = write_uint(p, static_cast<uint64_t>(units / kPerOne));
  *p++ = '.';
  return write_digits(p, static_cast<uint64_t>(units % kPerOne), decimals);
}

char* write_micros(char* p, int64_t micros) { return write_units<6>(p, micros); }

// sim_to_seconds(ns) as "{:.<decimals>f}" (the bound's comment above).
template <int decimals>
char* write_seconds(char* p, SimTime ns) {
  constexpr SimTime kUnitNs = decimals == 6 ? 1'000 : 1'000'000;
  if (ns < 0 || ns >= kIntegerPathLimitNs || ns % kUnitNs == kUnitNs / 2) {
    const double x = sim_to_seconds(ns);
    return decimals == 6 ? fmt::format_to(p, FMT_COMPILE("{:.6f}"), x)
                         : fmt::format_to(p, FMT_COMPILE("{:.3f}"), x);
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
    return fmt::format_to(p, FMT_COMPILE("{}.{:09d}"), ns / kNsPerSecond, ns % kNsPerSecond);
  }
  p = write_uint(p, static_cast<uint64_t>(ns / kNsPerSecond));
  *p++ = '.';
  return write_digits(p, static_cast<uint64_t>(ns % kNsPerSecond), 9);
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
