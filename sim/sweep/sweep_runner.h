// Runs a sweep's points, on threads, into DIR/points/<name>/ (each an ordinary run folder), and
// builds DIR/summary.csv: one row per point and policy, a column per swept key, then the
// policy's summary columns. Rows follow point index then policy order whatever the thread count,
// so the file's bytes depend only on the inputs.
//
// Resume: a point whose folder already holds manifest.json (written last by run_scenario) for the
// same resolved scenario is not run again, so a sweep killed midway continues where it stopped.
// Shards: `--shard i/n` runs the points with index % n == i; `merge_sweeps` joins the folders of
// all shards (or one shared folder) into the same summary.csv a single run writes
// (sim/sweep/sweep_summary.h). The index of the points, sweep.json, is sim/sweep/sweep_index.h.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "sim/run/scenario_runner.h"
#include "sim/sweep/sweep_plan.h"
#include "sim/sweep/sweep_summary.h"

namespace kvsim {

class Catalog;

struct SweepOptions {
  std::filesystem::path out_dir;
  int jobs = 1;         // worker threads
  int shard_index = 0;  // this process runs points with index % shard_count == shard_index
  int shard_count = 1;
  bool progress = false;  // a progress line on stderr (callers pass isatty(stderr))
  RunOptions run;         // per point; out_dir is set per point
  // Called on run_sweep's own thread about every 50 ms while points run (the points themselves
  // run on worker threads); it may throw to abandon the sweep: no point starts after it, the
  // running ones stop within a few thousand events and write nothing, and run_sweep rethrows
  // what it threw (the Python module raises KeyboardInterrupt from it on Ctrl-C).
  std::function<void()> interrupt_check;
};

struct SweepReport {
  size_t points_total = 0;
  size_t points_mine = 0;  // in this shard
  size_t points_run = 0;
  size_t points_skipped = 0;     // complete from an earlier run
  bool summary_written = false;  // only a whole (unsharded) sweep writes summary.csv
};

// Throws what a point's run throws (ConfigError, InputError, InvariantError), prefixed with the
// point; after the first failure no new point starts, and the running ones finish.
SweepReport run_sweep(const SweepPlan& plan, const Catalog& catalog, const SweepOptions& options);

// Parses "i/n" (0 <= i < n). Throws InputError.
void parse_shard(const std::string& text, int& index, int& count);

}  // namespace kvsim
