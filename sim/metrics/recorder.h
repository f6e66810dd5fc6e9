// Collects what one policy's run produced: an outcome per request, latencies, memory at the
// moment of peak use and each category's own peak, KV pool occupancy, time-weighted KV waste,
// SLO attainment, and the rows of requests.csv (in id order) and timeseries.csv.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"
#include "models/memory/gpu_memory_pool.h"
#include "models/memory/kv_metrics.h"
#include "models/memory/memory_snapshot.h"
#include "sim/metrics/breakdown.h"
#include "sim/metrics/decode_run.h"
#include "sim/metrics/distribution.h"
#include "sim/metrics/in_order_rows.h"
#include "sim/metrics/latency_stats.h"
#include "sim/metrics/offload_stats.h"
#include "sim/metrics/slo.h"
#include "sim/metrics/spec_decode_stats.h"
#include "sim/request/request_state.h"

namespace kvsim {

// How a policy spreads the model over GPUs and what one GPU holds: written to
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
  // The pool's capacity in tokens (each GPU holds them all); for a hybrid model what vLLM logs
  // as its KV cache size (tokens max_model_len requests can use: sim/run/scenario_setup.cc).
  int64_t kv_pool_tokens_per_gpu = 0;
};

// Batch and engine figures (docs/metrics.md "Batch and engine metrics"): one
// sample per iteration (forward pass). Batch size: sequences in it (prefill chunks + decodes);
// batch tokens: tokens it computes (prefill chunk tokens + one per decode); iteration time: its
// duration. busy_share: time with an iteration in flight / duration_s. mfu: the latency model's
// FLOPs of every iteration (per GPU: one GPU's shard) / (the GPU's dense FP16 peak x duration_s):
// with TP x PP GPUs each doing its shard, the replica's FLOPs over its GPUs' peak is the same.
// A cluster policy's block (sim/cluster/cluster_summary.h) covers every replica: iterations
// summed, distributions merged, busy_s summed; busy_share and mfu the replicas' own, averaged
// weighted by each one's GPU time (its GPUs x its duration_s); flops and peak per GPU averaged
// over the GPUs.
struct BatchSummary {
  int64_t iterations = 0;
  LatencyStats batch_size, batch_tokens, iteration_s;
  Histogram batch_size_hist, batch_tokens_hist, iteration_s_hist;
  double busy_s = 0;
  double busy_share = 0;
  double flops = 0;             // per GPU, summed over iterations
  double peak_flops_per_s = 0;  // per GPU
  double mfu = 0;
};

// One replica of a cluster (sim/cluster): its own figures, from its own recorder.
struct ReplicaSummary {
  std::string label;  // "<group>-<index>", the requests.csv and timeseries.csv `replica` cell
  std::string group;
  int index = 0;  // within its group
  std::string gpu;
  std::string role = "mixed";  // mixed, prefill or decode (docs/cluster.md)
  int64_t requests_total = 0;
  std::array<int64_t, 7> outcomes{};  // by outcome_index()
  int64_t oom_events = 0, restarts = 0, preemptions = 0;
  int64_t peak_in_use_bytes = 0, peak_driver_used_bytes = 0;
  double kv_pool_peak_occupancy = 0, kv_pool_mean_occupancy = 0;
  LatencyStats ttft, tpot, e2e;
  int gpus = 1;        // tensor_parallel x pipeline_parallel of its engine
  std::string model;   // its group's own `model:` ("" when it runs the policy's)
  BatchSummary batch;  // its own iterations
};

// A policy run on a cluster: its router and replicas. The policy's own figures are the cluster
// totals: counts summed, latency percentiles over every request; its memory figures are those of
// `memory_replica`, the replica with the highest in-use peak (memory is per replica only).
struct ClusterSummary {
  std::string router;
  std::string memory_replica;
  std::vector<ReplicaSummary> replicas;
  // Disaggregated runs: each request's KV transfer time from its prefill to its decode replica
  // (count 0: no prefill replica; then summary.json has no `kv_transfer_s`).
  LatencyStats kv_transfer;
  // ... and how long each waited, from its first token to its transfer's start, for room on the
  // decode replica and for its prefill replica's link (summary.json `kv_transfer_wait_s`).
  LatencyStats kv_transfer_wait;
};

// Means over served requests of their latency breakdown (sim/metrics/breakdown.h), seconds.
struct BreakdownSummary {
  int64_t count = 0;
  double guard_queue_s = 0, engine_wait_s = 0, prefill_s = 0, decode_s = 0, preempted_s = 0;
};

struct PolicySummary {
  std::string name;
  // The policy's own `model:` / `gpu:` (a what-if beside the scenario's); "" when it runs the
  // scenario's (then summary.json has no such key, so other summaries keep their bytes).
  std::string model, gpu;
  int64_t requests_total = 0;
  std::array<int64_t, 7> outcomes{};  // by outcome_index()
  double availability = 0;            // (completed + completed_truncated) / requests_total
  int64_t oom_events = 0;
  int64_t restarts = 0;
  int64_t preemptions = 0;
  int64_t iterations = 0;  // forward passes (benchmarks' rate; not in the result files)
  int64_t fast_forward_iterations = 0;  // of them, run in closed form (not in the result files)
  int64_t quiet_iterations = 0;  // of those, recorded in runs (Recorder::on_decode_run; ditto)
  int64_t tokens_dropped = 0;
  int64_t output_tokens_served = 0;
  double duration_s = 0;            // first arrival to last outcome (0 with no request)
  double goodput_tokens_per_s = 0;  // output tokens of completed requests / duration
  LatencyStats ttft, tpot, e2e;     // seconds, completed requests only
  // vLLM /metrics' TPOT as a whole-run figure (Recorder::report_tpot_metrics): the sum of
  // every served request's inter-token gaps (first token to last) over all their output
  // tokens, first tokens included; unset unless asked for.
  std::optional<double> tpot_metrics_s;
  int64_t peak_driver_used_bytes = 0;  // capacity - driver free: what nvidia-smi would show
  KvWasteSummary kv;                   // time-weighted fragmentation

  // Memory peaks (docs/metrics.md). The snapshot is one instant, the first at which in-use
  // bytes (capacity - free - kv_free - allocator_cache) were highest: its categories sum to
  // capacity. Each category's own peak may come from a different instant: those do not.
  std::array<int64_t, kMemCategoryCount> peak_snapshot_bytes{};
  double peak_snapshot_t_s = 0;
  int64_t peak_in_use_bytes = 0;
  std::array<int64_t, kMemCategoryCount> category_peaks_bytes{};
  // KV pool occupancy: KV bytes held for requests (live + waste) over kv_pool_bytes
  // (kv_pool_capacity_bytes()); the peak, and the time-weighted mean over the interval KV may be
  // held: duration_s, widened to every instant KV was held (a prefill replica's KV outlives its
  // outcomes until the transfer ends; a stopped run's, the stop). 0 <= mean <= peak <= 1.
  int64_t kv_pool_bytes = 0;
  double kv_pool_peak_occupancy = 0;
  double kv_pool_mean_occupancy = 0;

  // SLO figures; all unset when the policy has no SLO (no `slo:` anywhere).
  std::optional<SloBounds> slo;
  int64_t slo_met = 0;                    // `completed` requests within every bound
  double slo_attainment = 0;              // slo_met / requests_total (1 with no request)
  double slo_goodput_requests_per_s = 0;  // slo_met / duration_s
  double slo_goodput_tokens_per_s = 0;    // their output tokens / duration_s

  // Prefix caching (vLLM's PrefixCacheStats), counted when a request never preempted is admitted.
  bool prefix_caching = false;      // the policy's store has enable_prefix_caching
  int64_t prefix_hit_blocks = 0;    // cached blocks shared instead of computed
  int64_t prefix_hit_tokens = 0;    // their tokens
  int64_t prefix_query_tokens = 0;  // tokens looked up (each admitted request's prompt)
  double prefix_hit_rate = 0;       // hit / query tokens (0 with no query)

  // Speculative decoding (the engine's speculative_config); nullopt without it.
  std::optional<SpecDecodeStats> speculative;
  // KV offloading (the engine's kv_offloading); nullopt without it.
  std::optional<OffloadStats> kv_offloading;

  std::optional<GpuLayoutSummary> gpu_layout;  // set by the scenario runner (see above)
  int gpus = 1;  // every GPU the policy runs on: each replica's TP x PP, summed (manifest.json)
  std::optional<ClusterSummary> cluster;  // cluster runs only (docs/cluster.md)

  // A latency metric past LatencySamples' exact limit: percentiles from the
  // sketch (summary.json says so; absent when exact, so small runs keep their bytes).
  bool latency_sketched = false;
  // A run stopped by --max-wall-s: requests arrived but without an outcome when it stopped
  // (outcomes + in_flight_at_stop = requests_total); nullopt for a run that ran to its end.
  std::optional<int64_t> in_flight_at_stop;

  BatchSummary batch;          // iterations, batch sizes, busy share, MFU
  BreakdownSummary breakdown;  // where served requests' time went
};

// The denominator of KV pool occupancy. A preallocated store (paged, contiguous): its size, the
// bytes of its blocks or arena. The caching allocator has no pool: the bytes it may hand out
// beyond the weights (capacity - context - weights - workspace), the most KV it could ever hold.
int64_t kv_pool_capacity_bytes(const GpuMemoryPool& pool);

// Checking mode (--check-invariants): 0 <= mean <= peak <= 1 for the KV pool occupancy of the
// policy and of each of its replicas. Throws InvariantError naming the policy and replica.
void check_occupancy(const PolicySummary& s);

class Recorder {
 public:
  explicit Recorder(std::string policy) : policy_(std::move(policy)) {}

  // Rows go straight to these files (borrowed; they must outlive the recorder). Without files
  // (a run with no output folder) rows are not formatted at all: nothing grows with the run's
  // length but the latency samples the percentiles need. `columns`: the scenario's offloading
  // columns (OffloadColumns: requests.csv's TTFT split, timeseries.csv's tier occupancy).
  void stream_to(AtomicFile* requests, AtomicFile* timeseries, OffloadColumns columns = {}) {
    request_file_ = requests;
    timeseries_file_ = timeseries;
    columns_ = columns;
  }
  // The denominator of the KV pool occupancy figures (0: they stay 0).
  void set_kv_pool_bytes(int64_t bytes) { summary_.kv_pool_bytes = bytes; }
  // The bounds SLO attainment is scored against (nullopt: no SLO figures).
  void set_slo(std::optional<SloBounds> slo) { summary_.slo = slo; }
  // Adds PolicySummary::tpot_metrics_s (the scenario names engine.vllm_version).
  void report_tpot_metrics(bool on) { report_tpot_metrics_ = on; }

  // Cluster replicas (sim/cluster): this recorder keeps the replica's own figures, and its
  // arrivals and outcomes also go to `cluster`'s recorder (the cluster totals and the
  // requests.csv rows, which get `replica` as their last column); its timeseries rows get it too.
  void report_to(Recorder* cluster, std::string replica) {
    cluster_ = cluster;
    replica_ = std::move(replica);
  }

  // `forward`: false for the decode half of a disaggregated request (the cluster saw it arrive).
  // A disaggregated request's KV moved from its prefill to its decode replica in `seconds`.
  void on_kv_transfer(double seconds) { kv_transfer_.add(seconds); }
  LatencyStats kv_transfer_stats() const { return kv_transfer_.stats(); }
  void on_kv_transfer_wait(double seconds) { kv_transfer_wait_.add(seconds); }
  LatencyStats kv_transfer_wait_stats() const { return kv_transfer_wait_.stats(); }
  void on_arrival(SimTime t, bool forward = true) {
    if (cluster_ && forward) cluster_->on_arrival(t);
    if (summary_.requests_total++ == 0 || t < first_arrival_) first_arrival_ = t;
  }
  // `replica`: the requests.csv `replica` cell (cluster runs only; empty: no such column).
  void on_outcome(const RequestState& r, std::string_view replica = {});
  int64_t outcomes_recorded() const {  // for the progress line
    int64_t n = 0;
    for (int64_t c : summary_.outcomes) n += c;
    return n;
  }
  void on_oom() { ++summary_.oom_events; }
  void on_restart() { ++summary_.restarts; }
  void on_preemption() { ++summary_.preemptions; }
  void on_iteration() { ++summary_.iterations; }
  void on_fast_forward_iteration() {  // an iteration of a decode stretch run in closed form
    ++summary_.iterations;
    ++summary_.fast_forward_iterations;
  }
  // Batch and engine metrics (BatchSummary): the peak the MFU is over, and one iteration's shape,
  // duration and FLOPs (the latency model's, per GPU, in DecodeStepFixed's fixed point: an exact
  // integer sum) when it starts.
  void set_peak_flops(double per_s) { summary_.batch.peak_flops_per_s = per_s; }
  void on_batch(int64_t seqs, int64_t tokens, SimTime duration, Int128 flops) {
    batch_size_.add(seqs);
    batch_tokens_.add(tokens);
    iteration_time_.add(duration);
    busy_ns_ += duration;
    flops_ += flops;
  }
  // A cluster's recorder takes its replicas' iterations before finish(): their batch-size,
  // batch-token and iteration-time distributions merged and busy time summed (busy share and
  // MFU are GPU-time-weighted means, made by fold_replicas from the replicas' own figures).
  void merge_batches_of(const Recorder& replica) {
    batch_size_.merge(replica.batch_size_);
    batch_tokens_.merge(replica.batch_tokens_);
    iteration_time_.merge(replica.iteration_time_);
    busy_ns_ += replica.busy_ns_;
  }
  void on_prefix_caching() { summary_.prefix_caching = true; }
  // Speculative decoding: the policy speculates (its figures are reported), a decode step's
  // drafts and how many were accepted, and the output tokens one decode gained in a step.
  void on_speculative(const std::string& method, int num_speculative_tokens) {
    summary_.speculative = SpecDecodeStats{
        .method = method,
        .num_speculative_tokens = num_speculative_tokens,
        .accepted_per_position = std::vector<int64_t>(static_cast<size_t>(num_speculative_tokens))};
  }
  void on_draft(int64_t drafted, int64_t accepted) {
    summary_.speculative->add_draft(drafted, accepted);
  }
  void on_decode_tokens(int64_t tokens) {
    ++summary_.speculative->decode_steps;
    summary_.speculative->decode_tokens += tokens;
  }
  // KV offloading: the summary's figures, filled in by the replica's connector as it runs.
  OffloadStats& on_kv_offloading() { return summary_.kv_offloading.emplace(); }
  // A served request's TTFT split into `k` (queueing, loading, prefill).
  static void add_ttft_split(OffloadStats& k, const RequestState& r, const RequestBreakdown& b);
  // A served request's TTFT split, ns: queueing (guard queue and the engine's waiting queue, less
  // loading), loading (the tiers' loads before its first scheduling), prefill (first scheduling
  // to first token). The three sum to its TTFT.
  static std::array<SimTime, 3> ttft_split_ns(const RequestState& r, const RequestBreakdown& b);
  void on_offload_lookup(int64_t query_tokens, int64_t hit_tokens) {
    summary_.kv_offloading->query_tokens += query_tokens;
    summary_.kv_offloading->hit_tokens += hit_tokens;
  }
  void on_prefix_lookup(int64_t query_tokens, int64_t hit_tokens, int64_t hit_blocks) {
    summary_.prefix_query_tokens += query_tokens;
    summary_.prefix_hit_tokens += hit_tokens;
    summary_.prefix_hit_blocks += hit_blocks;
  }
  // The memory state from `t` on: peaks and a point of the time-weighted waste integral. Call
  // after every change of memory state (iteration start and end, OOM, restart), so no summary
  // figure depends on when the timeseries is sampled.
  void on_state(SimTime t, const MemorySnapshot& s);
  // on_state(t, end) for `end` the state `start` last recorded by on_state, with its activations
  // released into the cache that keeps them (a pool without a store allocator; a decode step's
  // end): only that cache and time move, so the same figures come without building `end`.
  void on_activations_released(SimTime t, const MemorySnapshot& start);
  // Records a DecodeRun: the same figures, to the bit, as calling for each step in order
  //   on_state(t_j, start(j)); on_batch(seqs, seqs, d_j, its FLOPs);
  //   on_fast_forward_iteration(); on_state(t_{j+1}, end(j))
  // with no pass over its steps but a search per duration histogram bucket and, at a new peak
  // in use, one to that peak's time (its sums are plan_steps'; tests/metrics/
  // decode_run_record_test.cc compares the two).
  void on_decode_run(const DecodeRun& run);
  // A periodic sample: a timeseries row (and nothing else). `tiers`: the replica's offload tiers
  // (null without kv_offloading: their cells, if the file has them, stay empty).
  void on_sample(SimTime t, const MemorySnapshot& s, int64_t guard_queue, int64_t waiting,
                 int64_t running, const TierSamples* tiers = nullptr);

  // `end`: when the run's last event happened (closes the waste integral). Writes the rows the
  // id-order buffer still holds (ids never seen leave a gap).
  // `stopped`: the run was cut short (--max-wall-s): requests without an outcome are counted as
  // in_flight_at_stop instead of failing the outcomes-sum-to-requests check.
  PolicySummary finish(SimTime end, bool stopped = false);

  // With `replica`, a last `replica` column (cluster runs); with `offload`'s columns, those
  // before it (requests.csv: ttft_queueing_s, ttft_loading_s, ttft_prefill_s; timeseries.csv:
  // cpu_tier_blocks, _bytes, _stored_blocks, _evicted_blocks, and disk_tier_ the same).
  static std::string request_header(bool replica = false, OffloadColumns offload = {});
  static std::string timeseries_header(bool replica = false, OffloadColumns offload = {});

 private:
  std::string policy_;
  Recorder* cluster_ = nullptr;  // report_to()
  std::string replica_;          // report_to()
  OffloadColumns columns_;       // stream_to()
  PolicySummary summary_;
  LatencySamples ttft_, tpot_, e2e_;
  LatencySamples kv_transfer_;       // on_kv_transfer()
  LatencySamples kv_transfer_wait_;  // on_kv_transfer_wait()
  KvWasteAccumulator kv_;
  SimTime first_arrival_ = 0;
  SimTime last_outcome_ = 0;
  AtomicFile* request_file_ = nullptr;
  AtomicFile* timeseries_file_ = nullptr;
  std::string line_;  // room for one streamed row (reused; its size is not the row's)
  InOrderRows rows_;  // requests.csv in id order
  // KV held for requests (live + waste) over time, for the occupancy mean.
  SimTime held_since_ = 0;
  int64_t held_bytes_ = 0;
  // Where KV was first held and where it last fell to none: with the arrivals and outcomes, the
  // interval the occupancy integral is taken over (a prefill replica holds a request's KV after
  // its outcome, until the transfer ends).
  std::optional<SimTime> held_from_;
  SimTime held_to_ = 0;
  void note_held(SimTime t, int64_t before, int64_t after) {
    if (after > 0 && !held_from_) held_from_ = t;
    if (before > 0 && after == 0) held_to_ = t;
  }
  int64_t peak_held_bytes_ = 0;
  int64_t slo_tokens_ = 0;
  bool report_tpot_metrics_ = false;
  SimTime served_gaps_ns_ = 0;  // served requests' first-to-last-token spans, summed  // output
                                // tokens of the requests that met the SLO
  Int128 held_byte_ns_ = 0;     // ∫ held dt, exact (1e11 B x 1e13 ns overflows int64)
  // Batch metrics and the latency breakdown's sums.
  CountDistribution batch_size_, batch_tokens_;
  LogDistribution iteration_time_;
  SimTime busy_ns_ = 0;
  Int128 flops_ = 0;                       // fixed point (DecodeStepFixed::kFlopsShift)
  std::array<SimTime, 5> breakdown_ns_{};  // guard_queue, engine_wait, prefill, decode, preempted
  void finish_batch_and_breakdown(PolicySummary& s) const;
  // on_outcome's requests.csv row (recorder_rows.cc): `served` with its TPOT `per` (none for a
  // one-token answer) and its latency breakdown `ns` (guard_queue, engine_wait, prefill, decode,
  // preempted).
  // `split`: its TTFT split (ttft_split_ns), written with columns_.tiers.
  void write_request_row(const RequestState& r, bool served, std::optional<double> per,
                         const std::array<SimTime, 5>& ns, const std::array<SimTime, 3>& split,
                         std::string_view replica);
};

}  // namespace kvsim
