#include "sim/run/arguments.h"

#include <cmath>

#include <fmt/format.h>

#include "core/errors.h"
#include "sim/run/scenario_runner.h"

namespace kvsim {

void check_arg(const ArgRange& r, double value, ArgFront front) {
  const bool ok = std::isfinite(value) && value >= r.min && value <= r.max &&
                  (!r.integer || value == std::floor(value));
  if (ok) return;
  throw InputError(fmt::format("{}: expected {}{} in [{}, {}], got {}", r.name(front),
                               r.integer ? "a whole number, " : "", r.what, r.min, r.max, value));
}

void check_run_options(const RunOptions& o, ArgFront front) {
  check_arg(args::kSampleInterval, o.sample_interval_s, front);
  check_arg(args::kMaxWall, o.max_wall_s, front);
  check_arg(args::kMaxSimTime, o.max_sim_time_s, front);
  check_arg(args::kTimelineTime, o.timeline_start_s, front);
  // The end may be infinite (no end); else a time after the start.
  if (std::isnan(o.timeline_end_s) || o.timeline_end_s <= o.timeline_start_s) {
    throw InputError(fmt::format("{}: expected START < END (simulated seconds), got {} and {}",
                                 args::kTimelineTime.name(front), o.timeline_start_s,
                                 o.timeline_end_s));
  }
}

}  // namespace kvsim
