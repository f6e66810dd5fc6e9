// Runs a scenario: every policy replays the same request stream (same seed) against its own
// replica, and the results go to one folder (manifest.json, summary.json, summary.csv,
// requests.csv, timeseries.csv), each written atomically.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sim/config/scenario.h"
#include "sim/metrics/recorder.h"
#include "workloads/traces/trace_reader.h"

namespace kvsim {

struct RunOptions {
  std::string out_dir;                 // empty: write nothing
  bool check_invariants = false;       // pool + bookkeeping checks after every iteration
  uint64_t max_events = 200'000'000;
  double max_sim_time_s = 30.0 * 24 * 3600;
  double sample_interval_s = 1.0;      // timeseries period
  // Set up everything a run would (each policy's engine, memory pool, profile and guards, the
  // workload with its trace's header) and stop before the first event: what `kvsim check` does,
  // so it finds every error a run would find before simulating. Nothing is written.
  bool validate_only = false;
};

struct RunResult {
  std::vector<PolicySummary> policies;
  std::string scenario_hash;  // FNV-1a of the resolved scenario text
  // Trace workloads only: what the reader did (the first policy's replay; every policy reads
  // the same rows). summary.json gets it as "trace".
  std::optional<TraceCounters> trace;
};

// FNV-1a of a scenario tree's YAML text: the `scenario_hash` of manifest.json and summary.json.
std::string scenario_hash(const YAML::Node& tree);

// Throws ConfigError for a bad scenario section, InputError for unreadable inputs or limits hit.
RunResult run_scenario(const Scenario& scenario, const RunOptions& options);

}  // namespace kvsim
