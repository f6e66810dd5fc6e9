#include "sim/cluster/cluster_summary.h"

#include "core/check.h"

namespace kvsim {

namespace {

// Adds a replica's optional figures to the totals: the first one present is copied.
template <class T>
void merge_optional(std::optional<T>& total, const std::optional<T>& part) {
  if (!part) return;
  if (total) {
    total->merge(*part);
  } else {
    total = *part;
  }
}

}  // namespace

void fold_replicas(PolicySummary& totals, const std::vector<PolicySummary>& replicas,
                   const std::vector<ReplicaIdentity>& identities, std::string router) {
  KVSIM_CHECK(replicas.size() == identities.size() && !replicas.empty(), "fold_replicas: sizes");
  ClusterSummary c;
  c.router = std::move(router);
  size_t worst = 0;
  std::array<int64_t, 7> routed_outcomes{};
  for (size_t i = 0; i < replicas.size(); ++i) {
    const PolicySummary& r = replicas[i];
    const ReplicaIdentity& id = identities[i];
    totals.oom_events += r.oom_events;
    totals.restarts += r.restarts;
    totals.preemptions += r.preemptions;
    totals.iterations += r.iterations;
    totals.prefix_caching = totals.prefix_caching || r.prefix_caching;
    totals.prefix_hit_blocks += r.prefix_hit_blocks;
    totals.prefix_hit_tokens += r.prefix_hit_tokens;
    totals.prefix_query_tokens += r.prefix_query_tokens;
    merge_optional(totals.speculative, r.speculative);
    merge_optional(totals.kv_offloading, r.kv_offloading);
    if (r.peak_in_use_bytes > replicas[worst].peak_in_use_bytes) worst = i;
    // A prefill replica's completions are first tokens handed to a decode replica, whose outcome
    // is the request's (docs/cluster.md, disaggregation); its failures are the request's own.
    const bool prefill = id.role == "prefill";
    for (size_t o = 0; o < routed_outcomes.size(); ++o) {
      const bool handed = o == outcome_index(Outcome::kCompleted) ||
                          o == outcome_index(Outcome::kCompletedTruncated);
      if (!(prefill && handed)) routed_outcomes[o] += r.outcomes[o];
    }
    c.replicas.push_back(ReplicaSummary{.label = id.label,
                                        .group = id.group,
                                        .index = id.index,
                                        .gpu = id.gpu,
                                        .role = id.role,
                                        .requests_total = r.requests_total,
                                        .outcomes = r.outcomes,
                                        .oom_events = r.oom_events,
                                        .restarts = r.restarts,
                                        .preemptions = r.preemptions,
                                        .peak_in_use_bytes = r.peak_in_use_bytes,
                                        .peak_driver_used_bytes = r.peak_driver_used_bytes,
                                        .kv_pool_peak_occupancy = r.kv_pool_peak_occupancy,
                                        .kv_pool_mean_occupancy = r.kv_pool_mean_occupancy,
                                        .ttft = r.ttft,
                                        .tpot = r.tpot,
                                        .e2e = r.e2e,
                                        .gpus = id.gpus,
                                        .model = id.model,
                                        .batch = r.batch});
  }
  // Busy share and MFU: each replica's own over its duration, weighted by its GPU time
  // (GPUs x duration_s), i.e. busy GPU-seconds (and FLOPs over peak) over measured GPU-seconds.
  // FLOPs and the peak per GPU: means over the GPUs.
  double gpu_s = 0, busy_gpu_s = 0, peak_gpu_s = 0, gpus = 0, flops = 0, peak = 0;
  for (size_t i = 0; i < replicas.size(); ++i) {
    const BatchSummary& b = replicas[i].batch;
    const double g = identities[i].gpus, d = replicas[i].duration_s;
    gpu_s += g * d;
    busy_gpu_s += g * b.busy_share * d;
    peak_gpu_s += g * b.mfu * d;
    gpus += g;
    flops += g * b.flops;
    peak += g * b.peak_flops_per_s;
  }
  BatchSummary& tb = totals.batch;
  tb.busy_share = gpu_s > 0 ? busy_gpu_s / gpu_s : 0;
  tb.mfu = gpu_s > 0 ? peak_gpu_s / gpu_s : 0;
  tb.flops = gpus > 0 ? flops / gpus : 0;
  tb.peak_flops_per_s = gpus > 0 ? peak / gpus : 0;
  totals.gpus = 0;
  for (const ReplicaIdentity& id : identities) totals.gpus += id.gpus;
  // Conservation: every outcome the totals hold is a replica's, except the requests routed to
  // nothing (failed_unavailable while every replica was down).
  const size_t unavailable = outcome_index(Outcome::kFailedUnavailable);
  for (size_t o = 0; o < routed_outcomes.size(); ++o) {
    KVSIM_CHECK(o == unavailable ? routed_outcomes[o] <= totals.outcomes[o]
                                 : routed_outcomes[o] == totals.outcomes[o],
                "cluster outcome {}: replicas {} vs totals {}", o, routed_outcomes[o],
                totals.outcomes[o]);
  }
  totals.prefix_hit_rate = totals.prefix_query_tokens > 0
                               ? static_cast<double>(totals.prefix_hit_tokens) /
                                     static_cast<double>(totals.prefix_query_tokens)
                               : 0.0;
  const PolicySummary& w = replicas[worst];
  c.memory_replica = identities[worst].label;
  totals.peak_driver_used_bytes = w.peak_driver_used_bytes;
  totals.kv = w.kv;
  totals.peak_snapshot_bytes = w.peak_snapshot_bytes;
  totals.peak_snapshot_t_s = w.peak_snapshot_t_s;
  totals.peak_in_use_bytes = w.peak_in_use_bytes;
  totals.category_peaks_bytes = w.category_peaks_bytes;
  totals.kv_pool_bytes = w.kv_pool_bytes;
  totals.kv_pool_peak_occupancy = w.kv_pool_peak_occupancy;
  totals.kv_pool_mean_occupancy = w.kv_pool_mean_occupancy;
  totals.gpu_layout = w.gpu_layout;
  totals.cluster = std::move(c);
}

}  // namespace kvsim
