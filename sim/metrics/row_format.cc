#include "sim/metrics/row_format.h"

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

}  // namespace

void append_seconds_6(fmt::memory_buffer& out, SimTime ns) {
  if (ns < 0 || ns >= kIntegerPathLimitNs || ns % 1000 == 500) {
    fmt::format_to(fmt::appender(out), FMT_COMPILE("{:.6f}"), sim_to_seconds(ns));
    return;
  }
  const SimTime us = ns / 1000 + (ns % 1000 > 500 ? 1 : 0);
  fmt::format_to(fmt::appender(out), FMT_COMPILE("{}.{:06d}"), us / 1'000'000, us % 1'000'000);
}

}  // namespace kvsim
