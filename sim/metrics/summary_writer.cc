#include "sim/metrics/summary_writer.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/text_table.h"

namespace kvsim {

namespace {

nlohmann::ordered_json stats_json(const LatencyStats& s) {
  return {{"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}, {"mean", s.mean}, {"count", s.count}};
}

nlohmann::ordered_json categories_json(const std::array<int64_t, kMemCategoryCount>& bytes) {
  nlohmann::ordered_json o;
  for (int c = 0; c < kMemCategoryCount; ++c) {
    o[std::string(mem_category_name(static_cast<MemCategory>(c)))] = bytes[c];
  }
  return o;
}

nlohmann::ordered_json histogram_json(const Histogram& h) {
  return {{"edges", h.edges}, {"counts", h.counts}};
}

// Batch and engine metrics (BatchSummary).
nlohmann::ordered_json batch_json(const BatchSummary& b) {
  nlohmann::ordered_json size = stats_json(b.batch_size), tokens = stats_json(b.batch_tokens),
                         time = stats_json(b.iteration_s);
  size["histogram"] = histogram_json(b.batch_size_hist);
  tokens["histogram"] = histogram_json(b.batch_tokens_hist);
  time["histogram"] = histogram_json(b.iteration_s_hist);
  return {{"iterations", b.iterations},
          {"batch_size", size},
          {"batch_tokens", tokens},
          {"iteration_s", time},
          {"busy_s", b.busy_s},
          {"busy_share", b.busy_share},
          {"flops_per_gpu", b.flops},
          {"peak_flops_per_s_per_gpu", b.peak_flops_per_s},
          {"mfu", b.mfu}};
}

// Means of the served requests' latency breakdown (BreakdownSummary).
nlohmann::ordered_json breakdown_json(const BreakdownSummary& d) {
  return {{"count", d.count},
          {"guard_queue_s", d.guard_queue_s},
          {"engine_wait_s", d.engine_wait_s},
          {"prefill_s", d.prefill_s},
          {"decode_s", d.decode_s},
          {"preempted_s", d.preempted_s}};
}

// A bound, or null when the SLO leaves that figure unbounded.
nlohmann::ordered_json bound_json(const std::optional<double>& b) {
  return b ? nlohmann::ordered_json(*b) : nlohmann::ordered_json(nullptr);
}

// "" for a figure of a policy without an SLO (an empty cell in summary.csv).
std::string slo_cell(const PolicySummary& p, double v) {
  return p.slo ? fmt::format("{:.6f}", v) : "";
}

// Cluster runs: a table of every policy's replicas after the policies' ("" otherwise).
std::string replica_table(const std::vector<PolicySummary>& policies) {
  const bool any = std::any_of(policies.begin(), policies.end(),
                               [](const PolicySummary& p) { return p.cluster.has_value(); });
  if (!any) return "";
  cli::TextTable t({"policy", "replica", "gpu", "requests", "completed", "lost_oom", "unavail",
                    "OOMs", "restarts", "TTFT p99 (s)", "E2E p99 (s)", "driver peak (GiB)",
                    "KV peak", "iterations", "busy", "MFU"});
  for (const PolicySummary& p : policies) {
    if (!p.cluster) continue;
    for (const ReplicaSummary& r : p.cluster->replicas) {
      auto n = [&](Outcome o) { return std::to_string(r.outcomes[outcome_index(o)]); };
      t.add_row({p.name, r.label, r.gpu, std::to_string(r.requests_total), n(Outcome::kCompleted),
                 n(Outcome::kLostOom), n(Outcome::kFailedUnavailable), std::to_string(r.oom_events),
                 std::to_string(r.restarts), fmt::format("{:.3f}", r.ttft.p99),
                 fmt::format("{:.3f}", r.e2e.p99),
                 fmt::format("{:.2f}", static_cast<double>(r.peak_driver_used_bytes) / (1 << 30)),
                 fmt::format("{:.1f}%", 100 * r.kv_pool_peak_occupancy),
                 std::to_string(r.batch.iterations),
                 fmt::format("{:.1f}%", 100 * r.batch.busy_share),
                 fmt::format("{:.1f}%", 100 * r.batch.mfu)});
    }
  }
  std::string out(1, '\n');  // (not "\n" + ...: a GCC 12 -Wrestrict false positive)
  out += t.render();
  return out;
}

// A policy's kv_offloading figures (docs/metrics.md), the CPU tier's under "cpu".
nlohmann::ordered_json offload_json(const OffloadStats& k) {
  nlohmann::ordered_json o = {{"backend", k.backend},
                              {"cpu",
                               {{"block_tokens", k.block_tokens},
                                {"block_bytes", k.block_bytes},
                                {"capacity_blocks", k.capacity_blocks},
                                {"query_tokens", k.query_tokens},
                                {"hit_tokens", k.hit_tokens},
                                {"hit_rate", k.hit_rate()},
                                {"loads", k.loads},
                                {"loaded_blocks", k.loaded_blocks},
                                {"loaded_bytes", k.loaded_bytes()},
                                {"stored_blocks", k.stored_blocks},
                                {"stored_bytes", k.stored_bytes()},
                                {"evicted_blocks", k.evicted_blocks},
                                {"skipped_stores", k.skipped_stores},
                                {"peak_blocks", k.peak_blocks},
                                {"load_link_busy_s", k.load_busy_s},
                                {"store_link_busy_s", k.store_busy_s}}}};
  // (Only when set: a run with the defaults writes what it wrote before these keys existed.)
  if (k.eviction_policy != "lru") o["cpu"]["eviction_policy"] = k.eviction_policy;
  if (k.store_threshold >= 2) {
    o["cpu"]["store_threshold"] = k.store_threshold;
    o["cpu"]["gated_blocks"] = k.gated_blocks;
  }
  const double n = k.ttft_count > 0 ? static_cast<double>(k.ttft_count) : 1.0;
  o["ttft_split_mean_s"] = {{"queueing", k.ttft_queueing_s / n},
                            {"loading", k.ttft_loading_s / n},
                            {"prefill", k.ttft_prefill_s / n}};
  if (k.disk) {
    const DiskTierStats& d = *k.disk;
    o["disk"] = {{"capacity_blocks", d.capacity_blocks},
                 {"loaded_blocks", d.loaded_blocks},
                 {"loaded_bytes", d.loaded_blocks * k.block_bytes},
                 {"stored_blocks", d.stored_blocks},
                 {"stored_bytes", d.stored_blocks * k.block_bytes},
                 {"evicted_blocks", d.evicted_blocks},
                 {"dropped_blocks", d.dropped_blocks},
                 {"peak_blocks", d.peak_blocks},
                 {"read_busy_s", d.read_busy_s},
                 {"write_busy_s", d.write_busy_s}};
  }
  return o;
}

// A policy's speculative decoding figures (docs/metrics.md).
nlohmann::ordered_json speculative_json(const SpecDecodeStats& sd) {
  return {{"method", sd.method},
          {"num_speculative_tokens", sd.num_speculative_tokens},
          {"drafts", sd.drafts},
          {"draft_tokens", sd.draft_tokens},
          {"accepted_tokens", sd.accepted_tokens},
          {"mean_acceptance_length", sd.mean_acceptance_length()},
          {"draft_acceptance_rate", sd.draft_acceptance_rate()},
          {"acceptance_per_position", sd.acceptance_per_position()},
          {"decode_steps", sd.decode_steps},
          {"tokens_per_decode_step", sd.tokens_per_decode_step()}};
}

}  // namespace

nlohmann::ordered_json summary_json(const std::vector<PolicySummary>& policies) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const PolicySummary& p : policies) {
    nlohmann::ordered_json o;
    o["name"] = p.name;
    if (!p.model.empty()) o["model"] = p.model;
    if (!p.gpu.empty()) o["gpu"] = p.gpu;
    o["requests_total"] = p.requests_total;
    nlohmann::ordered_json outcomes;
    for (Outcome oc : kFinalOutcomes)
      outcomes[std::string(outcome_name(oc))] = p.outcomes[outcome_index(oc)];
    o["outcomes"] = outcomes;
    o["availability"] = p.availability;
    o["oom_events"] = p.oom_events;
    o["restarts"] = p.restarts;
    o["preemptions"] = p.preemptions;
    o["tokens_dropped"] = p.tokens_dropped;
    o["output_tokens_served"] = p.output_tokens_served;
    o["duration_s"] = p.duration_s;
    o["goodput_tokens_per_s"] = p.goodput_tokens_per_s;
    o["ttft_s"] = stats_json(p.ttft);
    o["tpot_s"] = stats_json(p.tpot);
    o["e2e_s"] = stats_json(p.e2e);
    // vLLM 0.6 /metrics' TPOT (docs/metrics.md); only with engine.vllm_version, so that other
    // summaries keep their bytes.
    if (p.tpot_metrics_s) o["tpot_metrics_s"] = *p.tpot_metrics_s;
    // Only when they apply, so exact, complete runs keep their bytes.
    if (p.latency_sketched) {
      o["latency_percentiles"] = "sketch";
      o["sketch_rel_error"] = LatencySamples::kSketchRelError;
    }
    if (p.in_flight_at_stop) {
      o["partial"] = "max_wall_s";
      o["in_flight_at_stop"] = *p.in_flight_at_stop;
    }
    // Memory peaks, KV pool occupancy and SLO figures.
    o["peak_snapshot"] = {{"t_s", p.peak_snapshot_t_s},
                          {"in_use_bytes", p.peak_in_use_bytes},
                          {"bytes", categories_json(p.peak_snapshot_bytes)}};
    o["category_peaks_bytes"] = categories_json(p.category_peaks_bytes);
    o["peak_driver_used_bytes"] = p.peak_driver_used_bytes;
    o["kv_pool_bytes"] = p.kv_pool_bytes;
    o["kv_pool_peak_occupancy"] = p.kv_pool_peak_occupancy;
    o["kv_pool_mean_occupancy"] = p.kv_pool_mean_occupancy;
    if (p.slo) {
      o["slo"] = {{"ttft_s", bound_json(p.slo->ttft_s)},
                  {"tpot_s", bound_json(p.slo->tpot_s)},
                  {"e2e_s", bound_json(p.slo->e2e_s)}};
      o["slo_met"] = p.slo_met;
      o["slo_attainment"] = p.slo_attainment;
      o["slo_goodput_requests_per_s"] = p.slo_goodput_requests_per_s;
      o["slo_goodput_tokens_per_s"] = p.slo_goodput_tokens_per_s;
    } else {
      for (const char* k : {"slo", "slo_met", "slo_attainment", "slo_goodput_requests_per_s",
                            "slo_goodput_tokens_per_s"}) {
        o[k] = nullptr;
      }
    }
    o["fragmentation"] = {{"usage_efficiency", p.kv.usage_efficiency},
                          {"internal_fraction", p.kv.internal_fraction},
                          {"reservation_fraction", p.kv.reservation_fraction},
                          {"external_fraction", p.kv.external_fraction}};
    if (p.prefix_caching) {  // only for a store with enable_prefix_caching
      o["prefix_hit_blocks"] = p.prefix_hit_blocks;
      o["prefix_hit_tokens"] = p.prefix_hit_tokens;
      o["prefix_query_tokens"] = p.prefix_query_tokens;
      o["prefix_hit_rate"] = p.prefix_hit_rate;
    }
    // Only for a policy with kv_offloading, or with speculative_config.
    if (p.kv_offloading) o["kv_offloading"] = offload_json(*p.kv_offloading);
    if (p.speculative) o["speculative_decoding"] = speculative_json(*p.speculative);
    o["batch"] = batch_json(p.batch);
    o["latency_breakdown_mean_s"] = breakdown_json(p.breakdown);
    if (p.gpu_layout) {  // parallelism / quantization: only where set, see recorder.h
      const GpuLayoutSummary& g = *p.gpu_layout;
      o["gpu_layout"] = {{"memory_figures", "per GPU"},
                         {"gpus", g.gpus},
                         {"tensor_parallel", g.tensor_parallel},
                         {"pipeline_parallel", g.pipeline_parallel},
                         {"weights_dtype", g.weights_dtype},
                         {"kv_cache_dtype", g.kv_cache_dtype},
                         {"weights_bytes_per_gpu", g.weights_bytes_per_gpu},
                         {"kv_bytes_per_token_per_gpu", g.kv_bytes_per_token_per_gpu},
                         {"kv_pool_tokens_per_gpu", g.kv_pool_tokens_per_gpu}};
    }
    if (p.cluster) {  // cluster runs only (docs/cluster.md), so other summaries keep their bytes
      o["router"] = p.cluster->router;
      o["memory_figures"] = "replica " + p.cluster->memory_replica;
      nlohmann::ordered_json replicas = nlohmann::ordered_json::array();
      for (const ReplicaSummary& r : p.cluster->replicas) {
        nlohmann::ordered_json replica_outcomes;
        for (Outcome oc : kFinalOutcomes)
          replica_outcomes[std::string(outcome_name(oc))] = r.outcomes[outcome_index(oc)];
        replicas.push_back({{"replica", r.label},
                            {"group", r.group},
                            {"index", r.index},
                            {"gpu", r.gpu},
                            {"role", r.role},
                            {"requests_total", r.requests_total},
                            {"outcomes", replica_outcomes},
                            {"oom_events", r.oom_events},
                            {"restarts", r.restarts},
                            {"preemptions", r.preemptions},
                            {"peak_in_use_bytes", r.peak_in_use_bytes},
                            {"peak_driver_used_bytes", r.peak_driver_used_bytes},
                            {"kv_pool_peak_occupancy", r.kv_pool_peak_occupancy},
                            {"kv_pool_mean_occupancy", r.kv_pool_mean_occupancy},
                            {"ttft_s", stats_json(r.ttft)},
                            {"tpot_s", stats_json(r.tpot)},
                            {"e2e_s", stats_json(r.e2e)},
                            {"gpus", r.gpus},
                            {"batch", batch_json(r.batch)}});
        if (!r.model.empty()) replicas.back()["model"] = r.model;
      }
      o["replicas"] = replicas;
      if (p.cluster->kv_transfer.count > 0) {
        o["kv_transfer_s"] = stats_json(p.cluster->kv_transfer);
        o["kv_transfer_wait_s"] = stats_json(p.cluster->kv_transfer_wait);
      }
    }
    arr.push_back(o);
  }
  return {{"policies", arr}};
}

std::string summary_csv(const std::vector<PolicySummary>& policies) {
  std::string out = "policy,requests_total";
  for (Outcome oc : kFinalOutcomes) out += fmt::format(",{}", outcome_name(oc));
  out += ",availability,oom_events,restarts,preemptions,tokens_dropped,goodput_tokens_per_s";
  for (const char* m : {"ttft", "tpot", "e2e"})
    out += fmt::format(",{0}_p50_s,{0}_p90_s,{0}_p99_s", m);
  for (int c = 0; c < kMemCategoryCount; ++c) {
    out += fmt::format(",peak_{}_bytes", mem_category_name(static_cast<MemCategory>(c)));
  }
  out += ",usage_efficiency,internal_fraction,reservation_fraction,external_fraction";
  out += ",peak_in_use_bytes,kv_pool_peak_occupancy,kv_pool_mean_occupancy";
  out += ",slo_attainment,slo_goodput_requests_per_s,slo_goodput_tokens_per_s";
  // Cluster runs: the batch figures (BatchSummary) and a last `replica` column, `all` on the
  // policy's totals row, followed by a row per replica (its label) with the figures
  // ReplicaSummary has and empty cells for the rest. Without a cluster, no such columns:
  // single-replica runs keep their bytes.
  const bool replicas = std::any_of(policies.begin(), policies.end(),
                                    [](const PolicySummary& p) { return p.cluster.has_value(); });
  out += replicas ? ",iterations,batch_size_mean,batch_tokens_mean,busy_share,mfu,replica\n" : "\n";
  auto batch_cells = [](const BatchSummary& b) {
    return fmt::format(",{},{:.6f},{:.6f},{:.6f},{:.6f}", b.iterations, b.batch_size.mean,
                       b.batch_tokens.mean, b.busy_share, b.mfu);
  };
  for (const PolicySummary& p : policies) {
    out += fmt::format("{},{}", p.name, p.requests_total);
    for (Outcome oc : kFinalOutcomes) out += fmt::format(",{}", p.outcomes[outcome_index(oc)]);
    out += fmt::format(",{:.6f},{},{},{},{},{:.3f}", p.availability, p.oom_events, p.restarts,
                       p.preemptions, p.tokens_dropped, p.goodput_tokens_per_s);
    for (const LatencyStats* s : {&p.ttft, &p.tpot, &p.e2e}) {
      out += fmt::format(",{:.6f},{:.6f},{:.6f}", s->p50, s->p90, s->p99);
    }
    for (int64_t b : p.category_peaks_bytes) out += fmt::format(",{}", b);
    out += fmt::format(",{:.6f},{:.6f},{:.6f},{:.6f}", p.kv.usage_efficiency,
                       p.kv.internal_fraction, p.kv.reservation_fraction, p.kv.external_fraction);
    out += fmt::format(",{},{:.6f},{:.6f}", p.peak_in_use_bytes, p.kv_pool_peak_occupancy,
                       p.kv_pool_mean_occupancy);
    out += fmt::format(",{},{},{}", slo_cell(p, p.slo_attainment),
                       slo_cell(p, p.slo_goodput_requests_per_s),
                       slo_cell(p, p.slo_goodput_tokens_per_s));
    if (!replicas) {
      out += '\n';
      continue;
    }
    out += batch_cells(p.batch) + ",all\n";
    if (!p.cluster) continue;
    for (const ReplicaSummary& r : p.cluster->replicas) {
      out += fmt::format("{},{}", p.name, r.requests_total);
      for (Outcome oc : kFinalOutcomes) out += fmt::format(",{}", r.outcomes[outcome_index(oc)]);
      out += fmt::format(",,{},{},{},,", r.oom_events, r.restarts, r.preemptions);
      for (const LatencyStats* s : {&r.ttft, &r.tpot, &r.e2e}) {
        out += fmt::format(",{:.6f},{:.6f},{:.6f}", s->p50, s->p90, s->p99);
      }
      out += std::string(kMemCategoryCount + 4, ',');
      out += fmt::format(",{},{:.6f},{:.6f}", r.peak_in_use_bytes, r.kv_pool_peak_occupancy,
                         r.kv_pool_mean_occupancy);
      out += fmt::format(",,,{},{}\n", batch_cells(r.batch), r.label);
    }
  }
  return out;
}

std::string summary_table(const std::vector<PolicySummary>& policies) {
  std::vector<std::string> header = {
      "policy",       "requests",    "completed",         "truncated", "rejected", "too_long",
      "timed_out",    "lost_oom",    "unavail",           "avail",     "OOMs",     "preempt",
      "TTFT p99 (s)", "E2E p99 (s)", "driver peak (GiB)", "KV peak",   "KV mean",  "SLO"};
  // A prefix-hit column only when some policy caches prefixes ("-" for the others).
  const bool prefix = std::any_of(policies.begin(), policies.end(),
                                  [](const PolicySummary& p) { return p.prefix_caching; });
  if (prefix) header.emplace_back("prefix hit");
  // The mean acceptance length (tokens a decode step with drafts) only when some policy
  // speculates.
  const bool spec = std::any_of(policies.begin(), policies.end(),
                                [](const PolicySummary& p) { return p.speculative.has_value(); });
  if (spec) header.emplace_back("accept len");
  cli::TextTable t(header);
  for (const PolicySummary& p : policies) {
    auto n = [&](Outcome o) { return std::to_string(p.outcomes[outcome_index(o)]); };
    std::vector<std::string> row = {
        p.name,
        std::to_string(p.requests_total),
        n(Outcome::kCompleted),
        n(Outcome::kCompletedTruncated),
        n(Outcome::kRejected),
        n(Outcome::kRejectedTooLong),
        n(Outcome::kTimedOut),
        n(Outcome::kLostOom),
        n(Outcome::kFailedUnavailable),
        fmt::format("{:.1f}%", 100 * p.availability),
        std::to_string(p.oom_events),
        std::to_string(p.preemptions),
        fmt::format("{:.3f}", p.ttft.p99),
        fmt::format("{:.3f}", p.e2e.p99),
        fmt::format("{:.2f}", static_cast<double>(p.peak_driver_used_bytes) / (1 << 30)),
        fmt::format("{:.1f}%", 100 * p.kv_pool_peak_occupancy),
        fmt::format("{:.1f}%", 100 * p.kv_pool_mean_occupancy),
        p.slo ? fmt::format("{:.1f}%", 100 * p.slo_attainment) : "-"};
    if (prefix) {
      row.push_back(p.prefix_caching ? fmt::format("{:.1f}%", 100 * p.prefix_hit_rate) : "-");
    }
    if (spec) {
      row.push_back(p.speculative ? fmt::format("{:.2f}", p.speculative->mean_acceptance_length())
                                  : "-");
    }
    t.add_row(row);
  }
  return t.render() + replica_table(policies);
}

}  // namespace kvsim
