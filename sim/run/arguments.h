// The ranges of the arguments the front ends (the `kvsim` command line, the Python module) hand
// to the library, in one place: each front end checks against the same table and names the
// argument as its user wrote it (--sample-interval on the command line, sample_interval in
// Python). run_scenario checks its RunOptions itself, so every caller gets the same check.
#pragma once

#include <string>

namespace kvsim {

struct RunOptions;

// Whose spelling an argument's name takes in a message.
enum class ArgFront { kCli, kPython };

struct ArgRange {
  const char* cli;     // e.g. "--sample-interval"
  const char* python;  // e.g. "sample_interval"
  double min, max;     // inclusive
  bool integer;        // a whole number
  const char* what;    // e.g. "a period in seconds"
  const char* name(ArgFront f) const { return f == ArgFront::kCli ? cli : python; }
};

namespace args {
inline constexpr ArgRange kSampleInterval{
    "--sample-interval", "sample_interval", 1e-6, 1e9, false, "a timeseries period in seconds"};
inline constexpr ArgRange kMaxWall{
    "--max-wall-s", "max_wall_s", 0, 1e12, false, "wall-clock seconds (0: no limit)"};
inline constexpr ArgRange kMaxSimTime{"--max-sim-time",   "max_sim_time", 1e-9, 1e12, false,
                                      "simulated seconds"};
inline constexpr ArgRange kTimelineTime{"--timeline-window", "timeline_window", 0, 1e15, false,
                                        "simulated seconds"};
inline constexpr ArgRange kJobs{"--jobs", "jobs", 1, 4096, true, "a number of threads"};
inline constexpr ArgRange kSeed{"--set seed", "seed", 0, 9007199254740992.0, true, "a random seed"};
inline constexpr ArgRange kKvSeq{"--seq", "seq", 1, 1e12, true, "sequence lengths in tokens"};
inline constexpr ArgRange kKvBatch{"--batch", "batch", 1, 1e8, true, "concurrent requests"};
inline constexpr ArgRange kCapacityGb{"--capacity-gb", "capacity_gb", 0.001, 1e6,
                                      false,           "decimal GB"};
inline constexpr ArgRange kWeightsGb{"--weights-gb", "weights_gb", 0, 1e6, false, "decimal GB"};
inline constexpr ArgRange kLatencySeq{"--seq",      "seq", 1,
                                      4294967296.0, true,  "prompt lengths in tokens"};
inline constexpr ArgRange kLatencyBatch{"--batch", "batch", 1,
                                        1048576,   true,    "concurrent requests"};
inline constexpr ArgRange kBlockSize{
    "--block-size", "block_size", 0, 1048576, true, "a block size in tokens (0: contiguous)"};
inline constexpr ArgRange kTensorParallel{"--tp", "tp", 1, 1024, true, "a parallel degree"};
inline constexpr ArgRange kPipelineParallel{"--pp", "pp", 1, 1024, true, "a parallel degree"};
}  // namespace args

// Throws InputError unless `value` is in `r` (and whole, when r.integer): "sample_interval:
// expected a timeseries period in seconds in [1e-06, 1e+09], got 0". NaN and infinities fail.
void check_arg(const ArgRange& r, double value, ArgFront front);

// Every range of `o` run_scenario depends on: the sample interval (0, a negative or a tiny one ran
// forever; NaN wrote an empty timeseries), the stop limits, the timeline window (start < end).
void check_run_options(const RunOptions& o, ArgFront front);

}  // namespace kvsim
