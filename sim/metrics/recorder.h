// Collects what one policy's run produced: an outcome per request, latencies, memory peaks by
// category, time-weighted KV waste, and the rows of requests.csv and timeseries.csv.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/memory/kv_metrics.h"
#include "models/memory/memory_snapshot.h"
#include "core/atomic_file.h"
#include "sim/serving/request_state.h"

namespace kvsim {

struct LatencyStats {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;
  int64_t count = 0;
};
// Percentiles with linear interpolation between order statistics (NumPy's default).
LatencyStats latency_stats(std::vector<double> values);

// How a policy spreads the model over GPUs and what one GPU holds (issue 15): written to
// summary.json only for policies with more than one GPU or an engine dtype override, so
// single-GPU results keep their bytes. Every memory figure of the summary is per GPU.
struct GpuLayoutSummary {
  int gpus = 1;
  int tensor_parallel = 1;
  int pipeline_parallel = 1;
  std::string weights_dtype;
  std::string kv_cache_dtype;
  int64_t weights_bytes_per_gpu = 0;
  int64_t kv_bytes_per_token_per_gpu = 0;
  int64_t kv_pool_tokens_per_gpu = 0;  // the pool's capacity in tokens (each GPU holds them all)
};

struct PolicySummary {
  std::string name;
  int64_t requests_total = 0;
  std::array<int64_t, 7> outcomes{};  // by outcome_index()
  double availability = 0;            // (completed + completed_truncated) / requests_total
  int64_t oom_events = 0;
  int64_t restarts = 0;
  int64_t preemptions = 0;
  int64_t iterations = 0;             // forward passes (benchmarks' rate; not in the result files)
  int64_t tokens_dropped = 0;
  int64_t output_tokens_served = 0;
  double duration_s = 0;              // first arrival to last outcome (0 with no request)
  double goodput_tokens_per_s = 0;    // output tokens of completed requests / duration
  LatencyStats ttft, tpot, e2e;       // seconds, completed requests only
  std::array<int64_t, kMemCategoryCount> peak_memory_bytes{};
  int64_t peak_driver_used_bytes = 0; // capacity - driver free: what nvidia-smi would show
  KvWasteSummary kv;                  // time-weighted fragmentation
  std::optional<GpuLayoutSummary> gpu_layout;  // set by the scenario runner (see above)
};

class Recorder {
 public:
  explicit Recorder(std::string policy) : policy_(std::move(policy)) {}

  // Rows go straight to these files (borrowed; they must outlive the recorder). Without files
  // (a run with no output folder) rows are not formatted at all: nothing grows with the run's
  // length but the latency samples the percentiles need.
  void stream_to(AtomicFile* requests, AtomicFile* timeseries) {
    request_file_ = requests;
    timeseries_file_ = timeseries;
  }

  void on_arrival(SimTime t) {
    if (summary_.requests_total++ == 0 || t < first_arrival_) first_arrival_ = t;
  }
  void on_outcome(const RequestState& r);
  void on_oom() { ++summary_.oom_events; }
  void on_restart() { ++summary_.restarts; }
  void on_preemption() { ++summary_.preemptions; }
  void on_iteration() { ++summary_.iterations; }
  // The memory state from `t` on: peaks and a point of the time-weighted waste integral. Call
  // after every change of memory state (iteration start and end, OOM, restart), so no summary
  // figure depends on when the timeseries is sampled.
  void on_state(SimTime t, const MemorySnapshot& s);
  // A periodic sample: a timeseries row (and nothing else).
  void on_sample(SimTime t, const MemorySnapshot& s, int64_t guard_queue, int64_t waiting,
                 int64_t running);

  // `end`: when the run's last event happened (closes the waste integral).
  PolicySummary finish(SimTime end);

  static std::string request_header();
  static std::string timeseries_header();

 private:
  std::string policy_;
  PolicySummary summary_;
  std::vector<double> ttft_, tpot_, e2e_;
  KvWasteAccumulator kv_;
  SimTime first_arrival_ = 0;
  SimTime last_outcome_ = 0;
  AtomicFile* request_file_ = nullptr;
  AtomicFile* timeseries_file_ = nullptr;
  std::string line_;  // one streamed row (reused)
};

}  // namespace kvsim
