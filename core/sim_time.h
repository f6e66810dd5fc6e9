// Simulated time: int64 nanoseconds, never double, so event order is exact and runs repeat
// byte for byte.
#pragma once

#include <cmath>
#include <cstdint>

namespace kvsim {

using SimTime = int64_t;  // nanoseconds since the start of the run

inline constexpr SimTime kNsPerSecond = 1'000'000'000;

// Seconds (double, e.g. from the latency model) to SimTime, rounded to the nearest ns; saturates
// at about 292 years instead of overflowing (a huge limit means "no limit").
inline SimTime seconds_to_sim(double s) {
  constexpr double kMaxSeconds = 9.2e9;
  if (!(s < kMaxSeconds)) return static_cast<SimTime>(kMaxSeconds * 1e9);
  if (!(s > -kMaxSeconds)) return -static_cast<SimTime>(kMaxSeconds * 1e9);
  return static_cast<SimTime>(std::llround(s * 1e9));
}
inline double sim_to_seconds(SimTime t) { return static_cast<double>(t) / 1e9; }

}  // namespace kvsim
