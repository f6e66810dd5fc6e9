// The Recorder's statistics: outcomes and latencies, memory peaks and the time-weighted KV
// figures, a decode run's at once, and the policy summary. Its rows are recorder_rows.cc's; a
// decode run's peaks, decode_run_peaks.h's.
#include "sim/metrics/recorder.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "models/latency/latency_model.h"
#include "sim/metrics/breakdown.h"
#include "sim/metrics/decode_run_peaks.h"

namespace kvsim {

int64_t kv_pool_capacity_bytes(const GpuMemoryPool& pool) {
  if (pool.kv().preallocated()) return pool.kv().usage().capacity_bytes;
  return pool.budget().device_bytes_for_torch();
}

void Recorder::on_outcome(const RequestState& r, std::string_view replica) {
  if (cluster_ && !r.prefill_only) cluster_->on_outcome(r, replica_);
  KVSIM_CHECK(r.outcome != Outcome::kNone, "request {} recorded without an outcome", r.spec.id);
  ++summary_.outcomes[outcome_index(r.outcome)];
  last_outcome_ = std::max(last_outcome_, r.finished_at);
  summary_.tokens_dropped += r.tokens_dropped;
  const bool served = r.outcome == Outcome::kCompleted || r.outcome == Outcome::kCompletedTruncated;
  double t1 = 0, tend = 0;
  std::optional<double> per;
  std::array<SimTime, 5> ns{};
  std::array<SimTime, 3> split{};
  if (served) {
    t1 = sim_to_seconds(r.first_token_at - r.spec.arrival);
    tend = sim_to_seconds(r.finished_at - r.spec.arrival);
    ttft_.add(t1);
    e2e_.add(tend);
    if (r.generated > 1) {
      per = (tend - t1) / static_cast<double>(r.generated - 1);
      tpot_.add(*per);
    }
    summary_.output_tokens_served += r.generated;
    served_gaps_ns_ += r.finished_at - r.first_token_at;
    const RequestBreakdown b = request_breakdown(r);
    ns = {b.guard_queue, b.engine_wait, b.prefill, b.decode, b.preempted};
    for (size_t i = 0; i < ns.size(); ++i) breakdown_ns_[i] += ns[i];
    ++summary_.breakdown.count;
    split = ttft_split_ns(r, b);
    if (summary_.kv_offloading) add_ttft_split(*summary_.kv_offloading, r, b);
    // SLOs score full answers only: a truncated prompt was answered, but not as asked.
    if (summary_.slo && r.outcome == Outcome::kCompleted && summary_.slo->met(t1, per, tend)) {
      ++summary_.slo_met;
      slo_tokens_ += r.generated;
    }
  }
  if (request_file_) write_request_row(r, served, per, ns, split, replica);
}

std::array<SimTime, 3> Recorder::ttft_split_ns(const RequestState& r, const RequestBreakdown& b) {
  const SimTime waited = b.guard_queue + b.engine_wait;
  return {waited - r.loading_ns, r.loading_ns, r.first_token_at - r.spec.arrival - waited};
}

void Recorder::add_ttft_split(OffloadStats& k, const RequestState& r, const RequestBreakdown& b) {
  const std::array<SimTime, 3> split = ttft_split_ns(r, b);
  ++k.ttft_count;
  k.ttft_queueing_s += sim_to_seconds(split[0]);
  k.ttft_loading_s += sim_to_seconds(split[1]);
  k.ttft_prefill_s += sim_to_seconds(split[2]);
}

void Recorder::finish_batch_and_breakdown(PolicySummary& s) const {
  BatchSummary& b = s.batch;
  b.iterations = batch_size_.count();
  b.batch_size = batch_size_.stats();
  b.batch_tokens = batch_tokens_.stats();
  b.iteration_s = iteration_time_.stats_seconds();
  b.batch_size_hist = batch_size_.histogram();
  b.batch_tokens_hist = batch_tokens_.histogram();
  b.iteration_s_hist = iteration_time_.histogram_seconds();
  b.busy_s = sim_to_seconds(busy_ns_);
  b.flops = static_cast<double>(
      std::ldexp(static_cast<long double>(flops_), -DecodeStepFixed::kFlopsShift));
  b.busy_share = s.duration_s > 0 ? b.busy_s / s.duration_s : 0;
  b.mfu = s.duration_s > 0 && b.peak_flops_per_s > 0 ? b.flops / (b.peak_flops_per_s * s.duration_s)
                                                     : 0;
  BreakdownSummary& d = s.breakdown;
  if (d.count > 0) {
    const double n = static_cast<double>(d.count);
    double* out[] = {&d.guard_queue_s, &d.engine_wait_s, &d.prefill_s, &d.decode_s, &d.preempted_s};
    for (size_t i = 0; i < breakdown_ns_.size(); ++i)
      *out[i] = sim_to_seconds(breakdown_ns_[i]) / n;
  }
}

void Recorder::on_state(SimTime t, const MemorySnapshot& s) {
  const auto cats = s.categories();
  for (int c = 0; c < kMemCategoryCount; ++c) {
    summary_.category_peaks_bytes[c] = std::max(summary_.category_peaks_bytes[c], cats[c]);
  }
  // Free, free KV blocks and cached allocator segments hold nothing: the rest is in use.
  const int64_t in_use =
      s.capacity_bytes - s.free_bytes - s.kv_free_bytes - s.allocator_cache_bytes;
  if (in_use > summary_.peak_in_use_bytes) {  // strict: the first instant of a tied peak
    summary_.peak_in_use_bytes = in_use;
    summary_.peak_snapshot_bytes = cats;
    summary_.peak_snapshot_t_s = sim_to_seconds(t);
  }
  const int64_t held = s.kv_live_bytes + s.kv_waste_bytes;
  held_byte_ns_ += static_cast<Int128>(held_bytes_) * (t - held_since_);  // exact
  held_since_ = t;
  note_held(t, held_bytes_, held);
  held_bytes_ = held;
  peak_held_bytes_ = std::max(peak_held_bytes_, held);
  summary_.peak_driver_used_bytes =
      std::max(summary_.peak_driver_used_bytes, s.capacity_bytes - s.driver_free_bytes);
  kv_.hold(t, KvSample::from(s));
}

void Recorder::on_activations_released(SimTime t, const MemorySnapshot& start) {
  // The end state's categories are start's with the activations moved to the allocator cache:
  // only that peak can rise. In use falls by the activations, below the peak start's call left;
  // KV held, its sample and driver-free memory are start's.
  int64_t& cache_peak =
      summary_.category_peaks_bytes[static_cast<int>(MemCategory::kAllocatorCache)];
  cache_peak = std::max(cache_peak, start.allocator_cache_bytes + start.activation_bytes);
  held_byte_ns_ += static_cast<Int128>(held_bytes_) * (t - held_since_);  // exact
  held_since_ = t;
  kv_.hold(t, KvSample::from(start));
}

void Recorder::on_decode_run(const DecodeRun& run) {
  const int64_t k = run.steps;
  if (k == 0) return;
  // Every integral over the run is a combination of its sums of d_j, j·d_j, crossed(j)·d_j and
  // swapped(j)·d_j (plan_steps').
  const Int128 d_sum = run.d_sum;
  const auto t_end = static_cast<SimTime>(run.t + d_sum);
  const auto figure = [&](auto&& of) {
    return RunFigure{of(run.start0), of(run.per_step), of(run.per_crossing), of(run.per_swap),
                     of(run.end_delta)};
  };
  const auto integral = [&](const RunFigure& f) {  // Σ f(start(j)) d_j
    return f.f0 * d_sum + f.fs * run.jd_sum + f.fc * run.xd_sum + f.fw * run.wd_sum;
  };
  // on_state's figures, in its order.
  const auto s0 = run.start0.categories(), ps = run.per_step.categories(),
             pc = run.per_crossing.categories(), pw = run.per_swap.categories(),
             pe = run.end_delta.categories();
  for (int c = 0; c < kMemCategoryCount; ++c) {
    summary_.category_peaks_bytes[c] =
        max_with_run(summary_.category_peaks_bytes[c], {s0[c], ps[c], pc[c], pw[c], pe[c]}, run);
  }
  // The peak in use: the first state of the run (start(0), end(0), start(1), ...) at the run's
  // largest, if above the peak so far. An end is start + fe: with fe <= 0 a start comes first.
  const RunFigure in_use = figure([](const MemorySnapshot& s) {
    return s.capacity_bytes - s.free_bytes - s.kv_free_bytes - s.allocator_cache_bytes;
  });
  const bool at_end = in_use.fe > 0;
  if (start_top(in_use, run) + (at_end ? in_use.fe : 0) > summary_.peak_in_use_bytes) {
    const auto [use_max, use_j] = start_max(in_use, run);  // where it is first reached
    summary_.peak_in_use_bytes = use_max + (at_end ? in_use.fe : 0);
    const int64_t x = run.crossed(use_j), w = run.swaps() ? run.swapped(use_j) : 0;
    for (int c = 0; c < kMemCategoryCount; ++c) {
      summary_.peak_snapshot_bytes[c] =
          s0[c] + use_j * ps[c] + x * pc[c] + w * pw[c] + (at_end ? pe[c] : 0);
    }
    summary_.peak_snapshot_t_s =
        sim_to_seconds(run.t + run.elapsed_before(use_j + (at_end ? 1 : 0)));
  }
  const RunFigure held =
      figure([](const MemorySnapshot& s) { return s.kv_live_bytes + s.kv_waste_bytes; });
  // The gap before the run at the last held figure, the run's starts over their steps (each end
  // lasts no time: the next start is at the same instant).
  const Int128 run_held_byte_ns = integral(held);
  held_byte_ns_ += static_cast<Int128>(held_bytes_) * (run.t - held_since_) + run_held_byte_ns;
  held_since_ = t_end;
  // A decode run holds its requests' KV at every step: only its end may release the last of it.
  if (run_held_byte_ns > 0) note_held(run.t, 0, 1);
  note_held(t_end, held_bytes_ > 0 || run_held_byte_ns > 0 ? 1 : 0, held.at_last(run) + held.fe);
  held_bytes_ = held.at_last(run) + held.fe;  // the last end
  peak_held_bytes_ = max_with_run(peak_held_bytes_, held, run);
  const RunFigure driver_used =
      figure([](const MemorySnapshot& s) { return s.capacity_bytes - s.driver_free_bytes; });
  summary_.peak_driver_used_bytes = max_with_run(summary_.peak_driver_used_bytes, driver_used, run);
  // The KV figures: an end's are its start's (activations are not KV).
  const RunFigure live = figure([](const MemorySnapshot& s) { return s.kv_live_bytes; });
  const RunFigure internal = figure([](const MemorySnapshot& s) { return s.kv_internal_bytes; });
  const RunFigure reservation =
      figure([](const MemorySnapshot& s) { return s.kv_reservation_bytes; });
  const RunFigure external = figure([](const MemorySnapshot& s) { return s.kv_external_bytes; });
  KVSIM_CHECK(live.fe == 0 && internal.fe == 0 && reservation.fe == 0 && external.fe == 0,
              "a decode step's end moved KV figures");
  const RunFigure footprint{live.f0 + internal.f0 + reservation.f0 + external.f0,
                            live.fs + internal.fs + reservation.fs + external.fs,
                            live.fc + internal.fc + reservation.fc + external.fc,
                            live.fw + internal.fw + reservation.fw + external.fw, 0};
  kv_.hold_run(
      run.t, KvSample::from(run.start0),
      {2 * integral(live), 2 * integral(internal), 2 * integral(reservation),
       2 * integral(external)},
      t_end,
      {live.at_last(run), internal.at_last(run), reservation.at_last(run), external.at_last(run)},
      run_max(footprint, run), run_max(live, run));
  // on_batch and on_fast_forward_iteration, k times.
  batch_size_.add(run.seqs, k);
  batch_tokens_.add(run.seqs, k);
  iteration_time_.add_sorted(
      k, [&run](int64_t j) { return run.duration_of(j); }, d_sum);
  busy_ns_ += static_cast<SimTime>(d_sum);
  flops_ += run.flops;
  summary_.iterations += k;
  summary_.fast_forward_iterations += k;
  summary_.quiet_iterations += k;
}

PolicySummary Recorder::finish(SimTime end, bool stopped) {
  PolicySummary s = summary_;
  s.name = policy_;
  int64_t total = 0;
  for (int64_t n : s.outcomes) total += n;
  if (stopped) s.in_flight_at_stop = s.requests_total - total;
  KVSIM_CHECK(stopped || total == s.requests_total, "policy {}: {} outcomes for {} requests",
              policy_, total, s.requests_total);
  const int64_t served = s.outcomes[outcome_index(Outcome::kCompleted)] +
                         s.outcomes[outcome_index(Outcome::kCompletedTruncated)];
  s.availability =
      s.requests_total ? static_cast<double>(served) / static_cast<double>(s.requests_total) : 1.0;
  const SimTime span =
      s.requests_total > 0 ? std::max<SimTime>(0, last_outcome_ - first_arrival_) : 0;
  s.duration_s = sim_to_seconds(span);
  s.goodput_tokens_per_s =
      span > 0 ? static_cast<double>(s.output_tokens_served) / s.duration_s : 0;
  s.ttft = ttft_.stats();
  s.tpot = tpot_.stats();
  s.e2e = e2e_.stats();
  if (report_tpot_metrics_) {
    s.tpot_metrics_s = s.output_tokens_served > 0 ? sim_to_seconds(served_gaps_ns_) /
                                                        static_cast<double>(s.output_tokens_served)
                                                  : 0.0;
  }
  s.latency_sketched = ttft_.sketched() || tpot_.sketched() || e2e_.sketched();
  if (!kv_.empty()) s.kv = kv_.summary(end);
  s.prefix_hit_rate = s.prefix_query_tokens > 0 ? static_cast<double>(s.prefix_hit_tokens) /
                                                      static_cast<double>(s.prefix_query_tokens)
                                                : 0.0;
  // Occupancy. The integral runs to `end`, but KV is held only from the first time it was held to
  // the last time it fell to none (or `end`, when some is still held): the mean is over that
  // interval, widened to [first arrival, last outcome] (duration_s). A replica's KV usually
  // lives between an arrival and its outcome, so the two agree; a prefill replica holds KV after
  // the outcome (its first token) until the transfer ends, and a mean over duration_s alone rose
  // above the peak, and above 1.
  if (s.kv_pool_bytes > 0) {
    const auto held_byte_ns = static_cast<long double>(
        held_byte_ns_ + static_cast<Int128>(held_bytes_) * std::max<SimTime>(0, end - held_since_));
    const auto pool = static_cast<long double>(s.kv_pool_bytes);
    SimTime from = s.requests_total > 0 ? first_arrival_ : held_from_.value_or(0);
    SimTime to = s.requests_total > 0 ? last_outcome_ : 0;
    if (held_from_) {
      from = std::min(from, *held_from_);
      to = std::max({to, held_to_, held_bytes_ > 0 ? end : 0});
    }
    const SimTime interval = std::max<SimTime>(0, to - from);
    s.kv_pool_peak_occupancy = static_cast<double>(peak_held_bytes_ / pool);
    s.kv_pool_mean_occupancy =
        interval > 0 ? static_cast<double>(held_byte_ns / (pool * interval)) : 0;
  }
  if (s.slo) {
    s.slo_attainment = s.requests_total
                           ? static_cast<double>(s.slo_met) / static_cast<double>(s.requests_total)
                           : 1.0;
    s.slo_goodput_requests_per_s = span > 0 ? static_cast<double>(s.slo_met) / s.duration_s : 0;
    s.slo_goodput_tokens_per_s = span > 0 ? static_cast<double>(slo_tokens_) / s.duration_s : 0;
  }
  finish_batch_and_breakdown(s);
  if (request_file_) {  // ids that never finished leave gaps; the rest still go in id order
    rows_.flush([this](std::string_view row) { request_file_->append(row); });
  }
  return s;
}

}  // namespace kvsim
