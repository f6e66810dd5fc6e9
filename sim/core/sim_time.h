// Simulated time: int64 nanoseconds, never double, so event order is exact and runs repeat
// byte for byte.
#pragma once

#include <cmath>
#include <cstdint>

namespace kvsim {

using SimTime = int64_t;  // nanoseconds since the start of the run

inline constexpr SimTime kNsPerSecond = 1'000'000'000;

// Seconds (double, e.g. from the latency model) to SimTime, rounded to the nearest ns.
inline SimTime seconds_to_sim(double s) { return static_cast<SimTime>(std::llround(s * 1e9)); }
inline double sim_to_seconds(SimTime t) { return static_cast<double>(t) / 1e9; }

}  // namespace kvsim
