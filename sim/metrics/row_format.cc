#include "sim/metrics/row_format.h"

#include <cmath>

#include <fmt/compile.h>

namespace kvsim {

namespace {

// Below 2^22 s the double x = ns / 1e9 lies within half an ulp (<= 2^-32 s, 0.24 ns) of the
// exact ns / 1e9. Rounding to microseconds, the exact value's distance to the nearest tie
// (a whole microsecond plus 500 ns) is a whole number of nanoseconds, so when it is not 0 it is
// at least 1 ns: x rounds as the exact value does, to the nearest microsecond of ns, which
// fmt's correctly rounded fixed-point output writes. Ties (ns % 1000 == 500) depend on how
// 1e9 divides in binary, so those, negative times and times past this bound go to fmt.
constexpr SimTime kIntegerPathLimitNs = SimTime{4'000'000} * kNsPerSecond;  // < 2^22 s

// Appends v (0 <= v < 10^digits) zero-padded to `digits` digits, as "{:0Nd}" writes it: the
// digits of 10^digits + v but its leading 1, through fmt's unpadded integer path (two digits a
// step; its padded path is several times slower).
void append_padded(fmt::memory_buffer& out, int64_t v, int digits) {
  static constexpr int64_t kPow10[] = {1, 10, 100, 1'000, 10'000, 100'000, 1'000'000, 10'000'000,
                                       100'000'000, 1'000'000'000};
  const fmt::format_int text(kPow10[digits] + v);
  out.append(text.data() + 1, text.data() + text.size());
}

}  // namespace

void append_seconds_9(fmt::memory_buffer& out, SimTime ns) {
  if (ns < 0) {  // never for a breakdown part; fmt's bytes all the same
    fmt::format_to(fmt::appender(out), FMT_COMPILE("{}.{:09d}"), ns / kNsPerSecond, ns % kNsPerSecond);
    return;
  }
  append_int(out, ns / kNsPerSecond);
  out.push_back('.');
  append_padded(out, ns % kNsPerSecond, 9);
}

void append_fixed_6(fmt::memory_buffer& out, double x) {
  // fmt writes the exact value v = x * 10^6 rounded to an integer. y = fl(v) is within
  // y * 2^-53 of v, and below 10^15 its fraction is exact; when that fraction is further than
  // y * 2^-52 from one half, v rounds to the same integer as y does. Otherwise (near a tie),
  // negatives (-0.0 included), NaN and large values: fmt.
  if (!(x >= 0 && x < 1e9) || std::signbit(x)) {
    fmt::format_to(fmt::appender(out), FMT_COMPILE("{:.6f}"), x);
    return;
  }
  const double y = x * 1e6;
  const double whole = std::floor(y);
  const double fraction = y - whole;
  if (std::fabs(fraction - 0.5) <= y * 0x1p-52) {
    fmt::format_to(fmt::appender(out), FMT_COMPILE("{:.6f}"), x);
    return;
  }
  const int64_t micros = static_cast<int64_t>(whole) + (fraction > 0.5 ? 1 : 0);
  append_int(out, micros / 1'000'000);
  out.push_back('.');
  append_padded(out, micros % 1'000'000, 6);
}

void append_seconds_6(fmt::memory_buffer& out, SimTime ns) {
  if (ns < 0 || ns >= kIntegerPathLimitNs || ns % 1000 == 500) {
    fmt::format_to(fmt::appender(out), FMT_COMPILE("{:.6f}"), sim_to_seconds(ns));
    return;
  }
  const SimTime us = ns / 1000 + (ns % 1000 > 500 ? 1 : 0);
  append_int(out, us / 1'000'000);
  out.push_back('.');
  append_padded(out, us % 1'000'000, 6);
}

}  // namespace kvsim
