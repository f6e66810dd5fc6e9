#include "sim/metrics/recorder.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/check.h"
#include "models/latency/latency_model.h"
#include "sim/metrics/breakdown.h"
#include "sim/metrics/row_format.h"
#include "sim/metrics/sort_doubles.h"

namespace kvsim {

LatencyStats latency_stats(std::vector<double> v) {
  LatencyStats s;
  s.count = static_cast<int64_t>(v.size());
  if (v.empty()) return s;
  sort_doubles(v);
  auto pct = [&](double p) {
    const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  s.p50 = pct(50);
  s.p90 = pct(90);
  s.p99 = pct(99);
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  return s;
}

void LatencySamples::add_to_sketch(double seconds) {
  sketch_.add(std::llround(seconds * 1e9));  // latencies are whole ns but TPOT (a quotient)
  sum_s_ += seconds;
}

void LatencySamples::add(double seconds) {
  if (sketched_) return add_to_sketch(seconds);
  if (exact_.size() < exact_limit_) return exact_.push_back(seconds);
  sketched_ = true;
  for (double x : exact_) add_to_sketch(x);
  exact_ = {};  // frees the samples
  add_to_sketch(seconds);
}

LatencyStats LatencySamples::stats() const {
  if (!sketched_) return latency_stats(exact_);
  LatencyStats s = sketch_.stats_seconds();
  s.mean = static_cast<double>(sum_s_ / static_cast<long double>(s.count));
  return s;
}

std::string Recorder::request_header(bool replica) {
  return std::string(
             "policy,id,arrival_s,prompt_tokens,prompt_tokens_served,output_tokens,generated,"
             "outcome,ttft_s,tpot_s,e2e_s,preemptions,tokens_dropped,"
             "guard_queue_s,engine_wait_s,prefill_s,decode_s,preempted_s") +
         (replica ? ",replica\n" : "\n");
}

std::string Recorder::timeseries_header(bool replica) {
  std::string h = "policy,t_s";
  for (int c = 0; c < kMemCategoryCount; ++c) {
    h += fmt::format(",{}_bytes", mem_category_name(static_cast<MemCategory>(c)));
  }
  return h + ",torch_allocated_bytes,torch_reserved_bytes,driver_free_bytes,guard_queue,waiting,"
             "running" + (replica ? ",replica\n" : "\n");
}

int64_t kv_pool_capacity_bytes(const GpuMemoryPool& pool) {
  if (pool.kv().preallocated()) return pool.kv().usage().capacity_bytes;
  return pool.budget().device_bytes_for_torch();
}

void check_occupancy(const PolicySummary& s) {
  // The mean and the peak are two divisions of exact integers by the pool; a mean equal to the
  // peak (KV held at its peak all along) may land an ulp or two above it.
  const auto check = [&](double peak, double mean, const std::string& replica) {
    KVSIM_CHECK(mean >= 0 && mean <= peak * (1 + 1e-12) && peak <= 1,
                "policy {}{}: KV pool occupancy mean {} and peak {} break 0 <= mean <= peak <= 1",
                s.name, replica.empty() ? "" : ", replica " + replica, mean, peak);
  };
  check(s.kv_pool_peak_occupancy, s.kv_pool_mean_occupancy, "");
  if (s.cluster) {
    for (const ReplicaSummary& r : s.cluster->replicas) {
      check(r.kv_pool_peak_occupancy, r.kv_pool_mean_occupancy, r.label);
    }
  }
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
    const RequestBreakdown b = request_breakdown(r);
    ns = {b.guard_queue, b.engine_wait, b.prefill, b.decode, b.preempted};
    for (size_t i = 0; i < ns.size(); ++i) breakdown_ns_[i] += ns[i];
    ++summary_.breakdown.count;
    // SLOs score full answers only: a truncated prompt was answered, but not as asked.
    if (summary_.slo && r.outcome == Outcome::kCompleted && summary_.slo->met(t1, per, tend)) {
      ++summary_.slo_met;
      slo_tokens_ += r.generated;
    }
  }
  if (!request_file_) return;
  // One row written straight into line_ (digits into a reused buffer, seconds from integer ns
  // where that gives fmt's bytes: a row per request is a visible share of a long run's CPU).
  // ttft, tpot and e2e are empty for requests not served. Room first: every cell fits in
  // kMaxCellChars, the names in their own length.
  const std::string_view outcome = outcome_name(r.outcome);
  const size_t room = policy_.size() + outcome.size() + replica.size() + 24 * kMaxCellChars;
  if (line_.size() < room) line_.resize(room);
  char* const start = line_.data();
  char* p = write_text(start, policy_);
  *p++ = ',';
  p = write_int(p, r.spec.id);
  *p++ = ',';
  p = write_seconds_6(p, r.spec.arrival);
  for (const int64_t v : {r.spec.prompt_tokens, r.prompt_tokens, r.spec.output_tokens, r.generated}) {
    *p++ = ',';
    p = write_int(p, v);
  }
  *p++ = ',';
  p = write_text(p, outcome);
  *p++ = ',';
  if (served) {
    p = write_seconds_6(p, r.first_token_at - r.spec.arrival);  // t1
    *p++ = ',';
    if (per) p = write_fixed_6(p, *per);
    *p++ = ',';
    p = write_seconds_6(p, r.finished_at - r.spec.arrival);  // tend
    *p++ = ',';
  } else {
    p = write_text(p, ",,,");
  }
  p = write_int(p, r.preemptions);
  *p++ = ',';
  p = write_int(p, r.tokens_dropped);
  *p++ = ',';
  if (served) {
    // The breakdown in exact ns (9 decimals), so its cells sum to E2E to the nanosecond.
    for (size_t i = 0; i < ns.size(); ++i) {
      if (i > 0) *p++ = ',';
      p = write_seconds_9(p, ns[i]);
    }
  } else {
    p = write_text(p, ",,,,");  // the breakdown: served requests only
  }
  if (!replica.empty()) {
    *p++ = ',';
    p = write_text(p, replica);
  }
  *p++ = '\n';
  rows_.put(r.spec.id, std::string_view(start, static_cast<size_t>(p - start)),
            [this](std::string_view row) { request_file_->append(row); });
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
  b.mfu = s.duration_s > 0 && b.peak_flops_per_s > 0
              ? b.flops / (b.peak_flops_per_s * s.duration_s)
              : 0;
  BreakdownSummary& d = s.breakdown;
  if (d.count > 0) {
    const double n = static_cast<double>(d.count);
    double* out[] = {&d.guard_queue_s, &d.engine_wait_s, &d.prefill_s, &d.decode_s, &d.preempted_s};
    for (size_t i = 0; i < breakdown_ns_.size(); ++i) *out[i] = sim_to_seconds(breakdown_ns_[i]) / n;
  }
}

void Recorder::on_state(SimTime t, const MemorySnapshot& s) {
  const auto cats = s.categories();
  for (int c = 0; c < kMemCategoryCount; ++c) {
    summary_.category_peaks_bytes[c] = std::max(summary_.category_peaks_bytes[c], cats[c]);
  }
  // Free, free KV blocks and cached allocator segments hold nothing: the rest is in use.
  const int64_t in_use = s.capacity_bytes - s.free_bytes - s.kv_free_bytes - s.allocator_cache_bytes;
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
  int64_t& cache_peak = summary_.category_peaks_bytes[static_cast<int>(MemCategory::kAllocatorCache)];
  cache_peak = std::max(cache_peak, start.allocator_cache_bytes + start.activation_bytes);
  held_byte_ns_ += static_cast<Int128>(held_bytes_) * (t - held_since_);  // exact
  held_since_ = t;
  kv_.hold(t, KvSample::from(start));
}

namespace {

// A linear figure of a memory state (a category, a sum of some), over a DecodeRun's steps:
// f(start(j)) = f0 + j·fs + crossed(j)·fc + swapped(j)·fw and f(end(j)) = f(start(j)) + fe.
struct RunFigure {
  int64_t f0, fs, fc, fw, fe;
  int64_t at(int64_t j, int64_t crossed, int64_t swapped) const {
    return f0 + j * fs + crossed * fc + swapped * fw;
  }
  int64_t at_last(const DecodeRun& run) const {
    return at(run.steps - 1, run.crossed_total, run.swapped_total);
  }
};

// The largest f(start(j)) over the run and the first j with it. j, crossed(j) and swapped(j)
// never decrease, so with fs, fc and fw all <= 0 it is at the start, and with all >= 0 and
// fs > 0 at the end. Else, as the crossings repeat every period of p steps, the figure moves by
// the same D each period (f(j + p) = f(j) + D), so its first largest is among the first p steps
// (D <= 0: each later step is a step of the first period moved by D or more times) or the last
// p (D > 0: each earlier step is below the step a period on): a pass over p steps, not the run.
std::pair<int64_t, int64_t> start_max(const RunFigure& f, const DecodeRun& run) {
  if (f.fs <= 0 && f.fc <= 0 && f.fw <= 0) {
    return {f.at(0, run.crossed_in_period[0], run.swapped_in_period[0]), 0};
  }
  if (f.fs > 0 && f.fc >= 0 && f.fw >= 0) return {f.at_last(run), run.steps - 1};
  const int64_t p = run.period();
  const int64_t x_period = run.crossed_in_period.back(), w_period = run.swapped_in_period.back();
  const int64_t per_period = f.at(p, x_period, w_period) - f.f0;
  const int64_t from = per_period > 0 ? std::max<int64_t>(0, run.steps - p) : 0;
  const int64_t to = per_period > 0 ? run.steps : std::min(p, run.steps);
  // From step `from` on: a period's entries and what the periods before it added.
  auto r = static_cast<size_t>(from % p);
  int64_t x_before = (from / p) * x_period, w_before = (from / p) * w_period;
  std::pair<int64_t, int64_t> best{0, -1};
  for (int64_t j = from; j < to; ++j) {
    const int64_t v = f.at(j, x_before + run.crossed_in_period[r], w_before + run.swapped_in_period[r]);
    if (best.second < 0 || v > best.first) best = {v, j};
    if (++r == run.crossed_in_period.size()) {
      r = 0;
      x_before += x_period;
      w_before += w_period;
    }
  }
  return best;
}

// start_max's figure alone: with fs, fc and fw all >= 0 it is the last start's, however long
// the figure stays there.
int64_t start_top(const RunFigure& f, const DecodeRun& run) {
  if (f.fs >= 0 && f.fc >= 0 && f.fw >= 0) return f.at_last(run);
  return start_max(f, run).first;
}

// The largest figure among the run's starts and ends.
int64_t run_max(const RunFigure& f, const DecodeRun& run) {
  return start_top(f, run) + std::max<int64_t>(0, f.fe);
}

// max(peak, run_max(f)): without start_max's pass over a figure that moves both ways (the KV
// waste: filled a token a step, a block's slack at a crossing) when even its bound, every rise
// and no fall, stays at or below the peak so far (as it does once a run's waste has been seen).
int64_t max_with_run(int64_t peak, const RunFigure& f, const DecodeRun& run) {
  const int64_t bound = f.f0 + std::max<int64_t>(0, f.fs) * (run.steps - 1) +
                        std::max<int64_t>(0, f.fc) * run.crossed_total +
                        std::max<int64_t>(0, f.fw) * run.swapped_total + std::max<int64_t>(0, f.fe);
  return bound <= peak ? peak : std::max(peak, run_max(f, run));
}

}  // namespace

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
      summary_.peak_snapshot_bytes[c] = s0[c] + use_j * ps[c] + x * pc[c] + w * pw[c] + (at_end ? pe[c] : 0);
    }
    summary_.peak_snapshot_t_s = sim_to_seconds(run.t + run.elapsed_before(use_j + (at_end ? 1 : 0)));
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
  kv_.hold_run(run.t, KvSample::from(run.start0),
               {2 * integral(live), 2 * integral(internal), 2 * integral(reservation),
                2 * integral(external)},
               t_end, {live.at_last(run), internal.at_last(run), reservation.at_last(run), external.at_last(run)},
               run_max(footprint, run), run_max(live, run));
  // on_batch and on_fast_forward_iteration, k times.
  batch_size_.add(run.seqs, k);
  batch_tokens_.add(run.seqs, k);
  iteration_time_.add_sorted(k, [&run](int64_t j) { return run.duration_of(j); }, d_sum);
  busy_ns_ += static_cast<SimTime>(d_sum);
  flops_ += run.flops;
  summary_.iterations += k;
  summary_.fast_forward_iterations += k;
  summary_.quiet_iterations += k;
}

void Recorder::on_sample(SimTime t, const MemorySnapshot& s, int64_t guard_queue, int64_t waiting,
                         int64_t running) {
  if (!timeseries_file_) return;
  // As a requests.csv row: straight into line_.
  const size_t room = policy_.size() + replica_.size() + 20 * kMaxCellChars;
  if (line_.size() < room) line_.resize(room);
  char* const start = line_.data();
  char* p = write_text(start, policy_);
  *p++ = ',';
  p = write_seconds_3(p, t);
  for (const int64_t b : s.categories()) {
    *p++ = ',';
    p = write_int(p, b);
  }
  for (const int64_t v : {s.torch_allocated_bytes, s.torch_reserved_bytes, s.driver_free_bytes,
                          guard_queue, waiting, running}) {
    *p++ = ',';
    p = write_int(p, v);
  }
  if (cluster_) {
    *p++ = ',';
    p = write_text(p, replica_);
  }
  *p++ = '\n';
  timeseries_file_->append(std::string_view(start, static_cast<size_t>(p - start)));
}

PolicySummary Recorder::finish(SimTime end, bool stopped) {
  PolicySummary s = summary_;
  s.name = policy_;
  int64_t total = 0;
  for (int64_t n : s.outcomes) total += n;
  if (stopped) s.in_flight_at_stop = s.requests_total - total;
  KVSIM_CHECK(stopped || total == s.requests_total, "policy {}: {} outcomes for {} requests", policy_, total,
              s.requests_total);
  const int64_t served = s.outcomes[outcome_index(Outcome::kCompleted)] +
                         s.outcomes[outcome_index(Outcome::kCompletedTruncated)];
  s.availability = s.requests_total ? static_cast<double>(served) / static_cast<double>(s.requests_total) : 1.0;
  const SimTime span = s.requests_total > 0 ? std::max<SimTime>(0, last_outcome_ - first_arrival_) : 0;
  s.duration_s = sim_to_seconds(span);
  s.goodput_tokens_per_s = span > 0 ? static_cast<double>(s.output_tokens_served) / s.duration_s : 0;
  s.ttft = ttft_.stats();
  s.tpot = tpot_.stats();
  s.e2e = e2e_.stats();
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
    s.slo_attainment = s.requests_total ? static_cast<double>(s.slo_met) /
                                              static_cast<double>(s.requests_total)
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
