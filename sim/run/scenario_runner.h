// Runs a scenario: every policy replays the same request stream (same seed) against its own
// replica, and the results go to one folder (manifest.json, summary.json, summary.csv,
// requests.csv, timeseries.csv), each written atomically.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "models/memory/gpu_memory_pool.h"
#include "sim/config/scenario.h"
#include "sim/metrics/observer.h"
#include "sim/metrics/recorder.h"
#include "sim/run/arguments.h"
#include "sim/serving/iteration_clock.h"
#include "workloads/traces/trace_reader.h"

namespace kvsim {

// The replica a clock is made for (RunOptions::make_clock): its policy, its place in it and its
// memory pool (the model as the engine resolved it, the KV store and its size).
struct ReplicaContext {
  int policy_index = 0;  // in the scenario's `policies:` order
  std::string policy;    // the policy's name
  int replica = 0;       // 0 without a cluster; else in the order the replicas are built
  std::string label;     // "" without a cluster; else the cluster's replica label
  const GpuMemoryPool* pool = nullptr;
};
using ClockMaker = std::function<std::unique_ptr<IterationClock>(const ReplicaContext&)>;

struct RunOptions {
  std::string out_dir;            // empty: write nothing
  bool check_invariants = false;  // pool + bookkeeping checks after every iteration
  // false: every policy steps one iteration per event whatever its engine.fast_forward says
  // (the outputs are the same; the scenario hash too, as the scenario is untouched).
  bool fast_forward = true;
  uint64_t max_events = 200'000'000;
  double max_sim_time_s = 30.0 * 24 * 3600;
  double sample_interval_s = 1.0;  // timeseries period
  // Stop cleanly once the wall clock since simulate() began passes this (0: no
  // limit): what finished is written, each policy marked partial
  // (PolicySummary::in_flight_at_stop).
  double max_wall_s = 0;
  // A progress line on stderr about every second (the CLI sets it when stderr is a terminal);
  // `progress_total`: the requests a policy will issue, when known (gives the ETA).
  bool progress = false;
  std::optional<int64_t> progress_total;
  // A Chrome trace-event file of the run (sim/timeline/timeline_writer.h), written atomically
  // whether or not out_dir is set; empty: none. Only what happens in the window is written.
  std::string timeline_path;
  double timeline_start_s = 0;
  double timeline_end_s = std::numeric_limits<double>::infinity();
  // A watcher of each replica (`kvsim run --trace-request`, sim/timeline/request_trace.h):
  // given the policy's name and the replica's label ("" without a cluster), it returns the
  // replica's observer (borrowed; nullptr: none). Not with a timeline (one observer a replica).
  std::function<ReplicaObserver*(const std::string& policy, const std::string& label)> observe;
  // `kvsim-validate replay`: each replica's iteration clock, made before it runs and
  // kept until its policy ends (empty: the latency model times every iteration, as `kvsim run`).
  ClockMaker make_clock;
  // What the outputs say about such a run: `marks` (a JSON object) go at the top level of
  // manifest.json and summary.json (nothing when null); `extra_files` (a name in out_dir, the
  // file streamed by the caller) are committed with the other results and listed in the
  // manifest's files.
  nlohmann::ordered_json marks;
  std::vector<std::pair<std::string, AtomicFile*>> extra_files;
  // Called about every 4,096 events (with the wall-clock checks); it may throw to abandon the run,
  // which then writes nothing (the Python module raises KeyboardInterrupt from it on Ctrl-C).
  std::function<void()> interrupt_check;
  // Whose spelling the options take in messages when a range is broken (sim/run/arguments.h).
  ArgFront arg_front = ArgFront::kCli;
};

struct RunResult {
  std::vector<PolicySummary> policies;
  std::string scenario_hash;  // FNV-1a of the resolved scenario text
  // Trace workloads only: what the reader did (the first policy's replay; every policy reads
  // the same rows). summary.json gets it as "trace".
  std::optional<TraceCounters> trace;
};

// The progress line (no newline): simulated time, requests with an outcome, their rate over the
// wall time so far, and with a known total the ETA at that rate. E.g.
// "kvsim: policy paged  t=120.0 s simulated  3,000 requests done (1,500/s)  ETA 2 s".
std::string progress_line(const std::string& policy, double sim_s, int64_t done,
                          std::optional<int64_t> total, double wall_s);

// FNV-1a of a scenario tree's YAML text: the `scenario_hash` of manifest.json and summary.json.
std::string scenario_hash(const YAML::Node& tree);

struct PreparedPolicy;  // sim/run/prepared_policy.h

// Everything a run sets up before its first event: per policy the engine, the memory pool (KV
// store sized from the budget, profile run), the latency profile, the guards and the workload
// (a trace opened and its header checked); the scenario's keys all checked; its hash. Refers to
// the scenario, which must outlive it. Move-only.
class PreparedScenario {
 public:
  PreparedScenario(PreparedScenario&&) noexcept;
  PreparedScenario& operator=(PreparedScenario&&) noexcept;
  ~PreparedScenario();

  const Scenario& scenario() const { return *scenario_; }
  const std::string& hash() const { return hash_; }
  const std::string& resolved_text() const { return resolved_; }  // the hashed YAML text

 private:
  friend PreparedScenario prepare_scenario(const Scenario&, const RunOptions&);
  friend RunResult simulate(PreparedScenario&, const RunOptions&);
  PreparedScenario();

  const Scenario* scenario_ = nullptr;
  std::string resolved_;
  std::string hash_;
  std::vector<std::unique_ptr<PreparedPolicy>> policies_;
};

// Sets up the run; what `kvsim check` does, so it finds every error a run would find, before
// simulating. Writes nothing. Throws ConfigError for a bad scenario section, InputError for
// unreadable inputs.
PreparedScenario prepare_scenario(const Scenario& scenario, const RunOptions& options);

// Runs every policy of `prepared` (each once: a prepared scenario is used up) and writes the
// results to options.out_dir (nothing when empty). Throws InputError for limits hit.
RunResult simulate(PreparedScenario& prepared, const RunOptions& options);

// prepare_scenario() then simulate().
RunResult run_scenario(const Scenario& scenario, const RunOptions& options);

}  // namespace kvsim
