// Recorder::on_decode_run records a run of decode steps at once (the fast-forward's quiet steps);
// it must leave exactly the figures the per-step calls leave: on_state at each step's start,
// on_batch, on_fast_forward_iteration, on_state at its end. Checked on a run worked out by hand,
// and on random runs (random states, moves of either sign, ends above or below their starts)
// against the calls themselves, through every summary figure they reach.
#include <catch2/catch.hpp>

#include <limits>
#include <random>
#include <vector>

#include "sim/metrics/recorder.h"
#include "sim/metrics/summary_writer.h"

using namespace kvsim;

namespace {

// Every field of a snapshot, so that states can be built and moved field by field.
constexpr int64_t MemorySnapshot::*kRunFields[] = {
    &MemorySnapshot::capacity_bytes,        &MemorySnapshot::context_bytes,
    &MemorySnapshot::weights_bytes,         &MemorySnapshot::workspace_bytes,
    &MemorySnapshot::activation_bytes,      &MemorySnapshot::kv_live_bytes,
    &MemorySnapshot::kv_waste_bytes,        &MemorySnapshot::kv_free_bytes,
    &MemorySnapshot::allocator_cache_bytes, &MemorySnapshot::free_bytes,
    &MemorySnapshot::kv_internal_bytes,     &MemorySnapshot::kv_reservation_bytes,
    &MemorySnapshot::kv_external_bytes,     &MemorySnapshot::torch_allocated_bytes,
    &MemorySnapshot::torch_reserved_bytes,  &MemorySnapshot::driver_free_bytes};

// start0 + j·per_step + x·per_crossing + w·per_swap (+ end_delta at an end).
MemorySnapshot run_state(const DecodeRun& run, int64_t j, int64_t x, int64_t w, bool end) {
  MemorySnapshot s;
  for (const auto f : kRunFields) {
    s.*f = run.start0.*f + j * run.per_step.*f + x * run.per_crossing.*f + w * run.per_swap.*f +
           (end ? run.end_delta.*f : 0);
  }
  return s;
}

// The calls a run stands for, one by one, from the run's closed form (its walk and its period,
// not plan_steps' sums and ends).
void record_steps(Recorder& r, const DecodeRun& run, const std::vector<Int128>& flops) {
  SimTime t = run.t;
  for (int64_t j = 0; j < run.steps; ++j) {
    const SimTime d = run.duration.ns_at(j);
    r.on_state(t, run_state(run, j, run.crossed(j), run.swapped(j), false));
    r.on_batch(run.seqs, run.seqs, d, flops[static_cast<size_t>(j)]);
    r.on_fast_forward_iteration();
    t += d;
    r.on_state(t, run_state(run, j, run.crossed(j), run.swapped(j), true));
  }
}

// A walk of durations: step j lasts floor((v0 + j·dv) / 2^40) ns, v0 = a + 2^39 (the rounding).
DecodeStepFixed::Walk walk_of(Int128 a, Int128 dv) {
  DecodeStepFixed s;
  s.ns_a = a;
  s.ns_b = dv;
  return DecodeStepFixed::Walk(s, 0, 1);
}

// The hand-worked run: from t = 100, two sequences, steps of 10, 11, 11, 12, 12, 13, ... ns
// (v_j = (10.9 + 0.5 j)·2^40), and one block crossed at the second step of each period of 3
// (cumulative {0, 1, 1}); no swaps. No steps planned yet.
const std::vector<int64_t> kHandCrossed = {0, 1, 1}, kHandSwapped = {0, 0, 0};
DecodeRun hand_run() {
  constexpr Int128 kNs = Int128{1} << DecodeStepFixed::kNsShift;
  DecodeRun run;
  run.t = 100;
  run.seqs = 2;
  run.duration = walk_of(10 * kNs + 2 * kNs / 5, kNs / 2);
  run.crossed_in_period = kHandCrossed;
  run.swapped_in_period = kHandSwapped;
  return run;
}

// One served request from 0 to `end` (so the summary has a span for its time-weighted means).
void serve_one(Recorder& r, SimTime end) {
  RequestState q;
  q.spec.id = 0;
  q.spec.arrival = 0;
  q.spec.prompt_tokens = 10;
  q.spec.output_tokens = 5;
  q.prompt_tokens = 10;
  q.generated = 5;
  q.first_token_at = 1;
  q.finished_at = end;
  q.outcome = Outcome::kCompleted;
  r.on_outcome(q);
}

// A draw from [lo, hi] (modulo bias is immaterial here).
int64_t uniform_in(std::mt19937_64& g, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(g() % static_cast<uint64_t>(hi - lo + 1));
}

std::string summary_text(Recorder& r, SimTime end) {
  PolicySummary s = r.finish(end);
  return summary_json({s}).dump();
}

}  // namespace

TEST_CASE("a decode run records what its steps' calls record, by hand", "[metrics][fast_forward]") {
  // Three steps of 2 sequences from t = 100 ns, lasting 10, 11 and 11 ns; the second crosses
  // into one block, so crossed = {0, 1, 1}. KV live 1,000 B + 200 B a step; waste 600 B, -200 a
  // step, +1,000 a crossing (a block of 1,000 B); free KV 5,000 B, -1,000 a crossing;
  // activations 50 B at a start, 0 at an end. Capacity 10,000 B: the rest is free memory.
  // Starts: live 1000, 1200, 1400; waste 600, 1400, 1200; kv_free 5000, 4000, 4000.
  //   held (live + waste) = 1600, 2600, 2600: ∫held = 1600·10 + 2600·11 + 2600·11 = 73,200 B·ns
  //   over the steps; the peak held is 2,600.
  //   in use (capacity - free - kv_free - cache) = live + waste + activations = 1650, 2650,
  //   2650: the peak is first reached at step 1's start, t = 110 ns.
  //   the waste peak is 1,400 (step 1), below both ends of the run.
  // The walk: v_j = (10.9 + 0.5 j)·2^40, so 10, 11 and 11 ns. One block crossed at step 1: a
  // period of 3 steps with cumulative crossings {0, 1, 1}.
  // Its sums: Σd = 32, Σ j·d = 11 + 22 = 33, Σ crossed·d = 11 + 11 = 22.
  DecodeRun run = hand_run();
  std::vector<SimTime> ends;
  run.plan_steps(3, std::numeric_limits<SimTime>::max(), 1'000, ends);
  REQUIRE(run.steps == 3);
  CHECK(run.duration.ns_at(0) == 10);
  CHECK(run.duration.ns_at(1) == 11);
  CHECK(run.duration.ns_at(2) == 11);
  CHECK(run.d_sum == 32);
  CHECK(run.jd_sum == 33);
  CHECK(run.xd_sum == 22);
  CHECK(run.wd_sum == 0);
  CHECK(run.crossed_total == 1);
  run.start0.capacity_bytes = 10'000;
  run.start0.kv_live_bytes = 1'000;
  run.start0.kv_waste_bytes = 600;
  run.start0.kv_reservation_bytes = 600;
  run.start0.kv_free_bytes = 5'000;
  run.start0.activation_bytes = 50;
  run.start0.free_bytes = 10'000 - 1'000 - 600 - 5'000 - 50;
  run.per_step.kv_live_bytes = 200;
  run.per_step.kv_waste_bytes = -200;
  run.per_step.kv_reservation_bytes = -200;
  run.per_crossing.kv_waste_bytes = 1'000;
  run.per_crossing.kv_reservation_bytes = 1'000;
  run.per_crossing.kv_free_bytes = -1'000;
  run.end_delta.activation_bytes = -50;
  run.end_delta.free_bytes = 50;
  run.flops = 3 * 256;  // 1 FLOP a step in on_batch's fixed point
  Recorder at_once("p"), stepped("p");
  for (Recorder* r : {&at_once, &stepped}) {
    r->set_kv_pool_bytes(8'000);
    r->on_arrival(0);
  }
  at_once.on_decode_run(run);
  record_steps(stepped, run, {256, 256, 256});
  for (Recorder* r : {&at_once, &stepped}) serve_one(*r, 200);
  const PolicySummary a = at_once.finish(200);
  const PolicySummary b = stepped.finish(200);
  CHECK(a.peak_in_use_bytes == 2'650);
  CHECK(a.peak_snapshot_t_s == 110e-9);
  CHECK(a.category_peaks_bytes[static_cast<int>(MemCategory::kKvWaste)] == 1'400);
  CHECK(a.iterations == 3);
  CHECK(a.fast_forward_iterations == 3);
  CHECK(a.quiet_iterations == 3);
  CHECK(b.quiet_iterations == 0);
  // Occupancy over the span [0, 200]: the held KV is 0 before t = 100, and after the run the
  // last end's 2,600 B from 132 to 200 ns: (73,200 + 2,600 · 68) / (8,000 · 200).
  CHECK(a.kv_pool_mean_occupancy ==
        Approx((73'200.0 + 2'600.0 * 68) / (8'000.0 * 200)).epsilon(1e-15));
  CHECK(a.kv_pool_peak_occupancy == Approx(2'600.0 / 8'000));
  CHECK(summary_json({a}).dump() == summary_json({b}).dump());
}

TEST_CASE("a decode run's steps stop before the horizon, a block shortage, or at most",
          "[metrics][fast_forward]") {
  // The walk of the hand-worked run: 10, 11, 11, 12, 12, 13 ns (v_j = (10.9 + 0.5 j)·2^40), from
  // t = 100: ends at 110, 121, 132, 144, 156, 169. Crossings {0, 1, 1} per period of 3: crossed
  // after each step 0, 1, 1, 1, 2, 2.
  std::vector<SimTime> ends;
  const auto steps = [&](int64_t most, SimTime horizon, int64_t free) {
    DecodeRun run = hand_run();
    run.plan_steps(most, horizon, free, ends);
    return run;
  };
  constexpr SimTime kNever = std::numeric_limits<SimTime>::max();
  // A step ending at the horizon is in flight when the event there comes: it is not taken.
  CHECK(steps(10, 132, 100).steps == 2);
  CHECK(steps(10, 133, 100).steps == 3);
  CHECK(steps(10, 170, 100).steps == 6);
  CHECK(steps(10, 169, 100).steps == 5);
  // No block free: step 1 (which crosses into one) is not taken; one free: steps 0 to 3 (step
  // 4 is the second crossing); two: all six.
  CHECK(steps(10, kNever, 0).steps == 1);
  CHECK(steps(10, kNever, 1).steps == 4);
  CHECK(steps(6, kNever, 2).steps == 6);
  CHECK(steps(4, kNever, 100).steps == 4);
  const DecodeRun four = steps(4, kNever, 100);
  // Σd = 10 + 11 + 11 + 12 = 44; Σ j·d = 11 + 22 + 36 = 69; Σ crossed·d = 11 + 11 + 12 = 34;
  // the ends after t: 10, 21, 32, 44.
  CHECK(four.d_sum == 44);
  CHECK(four.jd_sum == 69);
  CHECK(four.xd_sum == 34);
  CHECK(four.crossed_total == 1);
  CHECK(four.elapsed_before(0) == 0);
  CHECK(four.elapsed_before(2) == 21);
  CHECK(four.elapsed_before(4) == 44);
  CHECK(four.duration_of(3) == 12);
}

TEST_CASE("a decode run's sums stay exact with steps of years (128-bit paths)",
          "[metrics][fast_forward]") {
  // plan_steps sums in 64 bits where a bound allows and in 128 bits past it: steps of about
  // 2^55 ns (a year) make the crossings' weighted ends and each residue's starts pass 2^62, so
  // the 128-bit paths run; their sums must be the brute-force ones. 48 steps, crossings and
  // swaps in a period of 16.
  constexpr Int128 kNs = Int128{1} << DecodeStepFixed::kNsShift;
  DecodeRun run;
  run.t = 1'000;
  run.seqs = 3;
  run.duration = walk_of((Int128{1} << 55) * kNs + 7, Int128{1'000'003} * kNs);
  std::vector<int64_t> x, w;
  for (int64_t r = 0; r < 16; ++r) {
    x.push_back(r + (r % 3 == 0 ? 2 : 0));
    w.push_back(r / 2);
  }
  run.crossed_in_period = x;
  run.swapped_in_period = w;
  std::vector<SimTime> ends;
  run.plan_steps(48, std::numeric_limits<SimTime>::max(), std::numeric_limits<int64_t>::max() / 2,
                 ends);
  REQUIRE(run.steps == 48);
  Int128 d_sum = 0, jd_sum = 0, xd_sum = 0, wd_sum = 0;
  for (int64_t j = 0; j < 48; ++j) {
    const SimTime d = run.duration.ns_at(j);
    d_sum += d;
    jd_sum += j * static_cast<Int128>(d);
    xd_sum += run.crossed(j) * static_cast<Int128>(d);
    wd_sum += run.swapped(j) * static_cast<Int128>(d);
  }
  CHECK(run.d_sum == d_sum);
  CHECK(run.jd_sum == jd_sum);
  CHECK(run.xd_sum == xd_sum);
  CHECK(run.wd_sum == wd_sum);
}

TEST_CASE("a decode run's samples: the step in flight at each, none at a step's end",
          "[metrics][fast_forward]") {
  // The hand-worked walk from t = 100: steps end at 110, 121, 132, 144, 156, 169.
  std::vector<SimTime> ends;
  DecodeRun run = hand_run();
  run.plan_steps(6, std::numeric_limits<SimTime>::max(), 100, ends);
  REQUIRE(run.steps == 6);
  std::vector<std::pair<SimTime, int64_t>> samples;
  // Every 25 from 105: 105 in step 0 (100..110), 130 in step 2 (121..132), 155 in step 4
  // (144..156); 180 is past the run. All six steps stay.
  CHECK(run.samples_within(105, 25, samples) == 6);
  CHECK(samples == std::vector<std::pair<SimTime, int64_t>>{{105, 0}, {130, 2}, {155, 4}});
  // Every 2 from 140: 140, 142 and 144 are in step 3 (132..144), but 144 is its end: the run
  // keeps steps 0 to 2 and none of the samples (they were in step 3).
  CHECK(run.samples_within(140, 2, samples) == 3);
  CHECK(samples.empty());
  // Every 11 from 110: 110 is step 0's end: no step stays.
  CHECK(run.samples_within(110, 11, samples) == 0);
  // Every 7 from 108: 108 (step 0), 115 (step 1), 122 (step 2), 129 (step 2), 136 (step 3),
  // 143 (step 3), 150 (step 4), 157 (step 5), 164 (step 5); 171 past.
  CHECK(run.samples_within(108, 7, samples) == 6);
  CHECK(samples.size() == 9);
  CHECK(samples[3] == std::pair<SimTime, int64_t>{129, 2});
  CHECK(samples[8] == std::pair<SimTime, int64_t>{164, 5});
  // A step's start state: step 4 has 4 steps' moves and crossed(4) = 2 crossings.
  run.start0.kv_live_bytes = 1'000;
  run.per_step.kv_live_bytes = 200;
  run.per_crossing.kv_free_bytes = -1'000;
  run.start0.kv_free_bytes = 5'000;
  CHECK(run.start_state(4).kv_live_bytes == 1'800);
  CHECK(run.start_state(4).kv_free_bytes == 3'000);
}

TEST_CASE("a decode run records what its steps' calls record, on random runs",
          "[metrics][fast_forward][property]") {
  const uint64_t seed = GENERATE(range(0, 300));
  INFO("seed " << seed);
  std::mt19937_64 g(seed);
  const auto uniform = [&](int64_t lo, int64_t hi) { return uniform_in(g, lo, hi); };
  DecodeRun run;
  run.t = uniform(0, 1'000'000);
  run.seqs = uniform(1, 300);
  // Durations that grow by a fraction of a ns a step, by many, or not at all (a step's
  // duration grows with its context; the flash attention fit's slope may round to nothing).
  constexpr Int128 kNs = Int128{1} << DecodeStepFixed::kNsShift;
  const auto roll = g() % 3;
  const Int128 dv = roll == 0   ? 0
                    : roll == 1 ? Int128{uniform(0, int64_t{1} << 40)}
                                : Int128{uniform(0, 10'000'000)} * kNs;
  run.duration = walk_of(Int128{uniform(1, 1'000'000)} * kNs + uniform(0, int64_t{1} << 40), dv);
  // The crossings: a period of 1 to 16 steps, each crossing 0 to 4 blocks; swaps (a sliding
  // window's crossings that free a block each, counted apart) in a third of the runs.
  const int64_t p = uniform(1, 16);
  const bool swapping = g() % 3 == 0;
  std::vector<int64_t> x, w;
  int64_t crossed = 0, swapped = 0;
  for (int64_t r = 0; r < p; ++r) {
    const int64_t c = g() % 3 == 0 ? 0 : uniform(0, 4);
    crossed += c;
    swapped += swapping && g() % 2 == 0 ? uniform(0, 3) : 0;
    x.push_back(crossed);
    w.push_back(swapped);
  }
  run.crossed_in_period = x;
  run.swapped_in_period = w;
  std::vector<SimTime> ends;
  // Mostly short runs; a quarter longer than plan_steps' chunk of 128 steps. In a quarter an
  // event comes at a step's end or 1 ns after it: the steps are those that end before it.
  const int64_t most = g() % 4 == 0 ? uniform(61, 700) : uniform(1, 60);
  SimTime horizon = std::numeric_limits<SimTime>::max();
  int64_t expected_steps = most;
  if (most > 1 && g() % 4 == 0) {
    const int64_t last = uniform(1, most - 1);  // the step ending at or just before the event
    SimTime end = run.t;
    for (int64_t j = 0; j <= last; ++j) end += run.duration.ns_at(j);
    const bool after = g() % 2 == 0;
    horizon = end + (after ? 1 : 0);
    expected_steps = after ? last + 1 : last;
  }
  run.plan_steps(most, horizon, std::numeric_limits<int64_t>::max() / 2, ends);
  REQUIRE(run.steps == expected_steps);
  const int64_t k = run.steps;
  SimTime elapsed = 0;
  for (int64_t j = 0; j < k; ++j) {
    elapsed += run.duration.ns_at(j);
    REQUIRE(run.elapsed[static_cast<size_t>(j)] == elapsed);
  }
  // plan_steps' sums, by brute force from the closed form.
  Int128 d_sum = 0, jd_sum = 0, xd_sum = 0, wd_sum = 0;
  for (int64_t j = 0; j < k; ++j) {
    const SimTime d = run.duration.ns_at(j);
    d_sum += d;
    jd_sum += j * static_cast<Int128>(d);
    xd_sum += run.crossed(j) * static_cast<Int128>(d);
    wd_sum += run.swapped(j) * static_cast<Int128>(d);
    CHECK(run.duration_of(j) == d);
  }
  CHECK(run.d_sum == d_sum);
  CHECK(run.jd_sum == jd_sum);
  CHECK(run.xd_sum == xd_sum);
  CHECK(run.wd_sum == wd_sum);
  CHECK(run.crossed_total == run.crossed(k - 1));
  CHECK(run.swapped_total == run.swapped(k - 1));
  std::vector<Int128> flops;
  for (int64_t j = 0; j < k; ++j) flops.push_back(uniform(0, int64_t{1} << 50));
  for (const Int128 f : flops) run.flops += f;
  // Any signs: a figure that only grows, only shrinks, or both (waste), and ends above or
  // below their starts. The KV figures of an end are its start's (activations are not KV).
  for (const auto f : kRunFields) {
    run.start0.*f = uniform(0, int64_t{1} << 40);
    run.per_step.*f = uniform(-100'000, 100'000) * (g() % 3 == 0 ? 0 : 1);
    run.per_crossing.*f = uniform(-1'000'000, 1'000'000) * (g() % 3 == 0 ? 0 : 1);
    run.per_swap.*f = swapping ? uniform(-3'000'000, 1'000'000) * (g() % 3 == 0 ? 0 : 1) : 0;
    run.end_delta.*f = uniform(-100'000, 100'000) * (g() % 2 == 0 ? 0 : 1);
  }
  for (const auto f : {&MemorySnapshot::kv_live_bytes, &MemorySnapshot::kv_internal_bytes,
                       &MemorySnapshot::kv_reservation_bytes, &MemorySnapshot::kv_external_bytes}) {
    run.end_delta.*f = 0;
  }
  Recorder at_once("p"), stepped("p");
  // Some history first (peaks to beat or not, a held figure whose gap the run closes).
  MemorySnapshot before;
  for (const auto f : kRunFields) before.*f = uniform(0, int64_t{1} << 40);
  for (Recorder* r : {&at_once, &stepped}) {
    r->set_kv_pool_bytes(int64_t{1} << 41);
    r->on_arrival(0);
    r->on_state(run.t / 2, before);
    r->on_batch(3, 40, 1'234, 99);
  }
  at_once.on_decode_run(run);
  record_steps(stepped, run, flops);
  // And after: a state past the run.
  const SimTime end = run.t + static_cast<SimTime>(run.d_sum);
  for (Recorder* r : {&at_once, &stepped}) {
    r->on_state(end + 5, before);
    serve_one(*r, end + 10);
  }
  CHECK(summary_text(at_once, end + 10) == summary_text(stepped, end + 10));
}

TEST_CASE("a decode step's end recorded from its start leaves what on_state leaves",
          "[metrics][fast_forward][property]") {
  // The stretch's single steps record their end with on_activations_released(t, start): start
  // with its activations back in the allocator cache. By hand first: activations 300 B over a
  // cache of 100 B (the high-water is 400 B), so the end's cache is 400 B, its peak; in use
  // (capacity - free - KV free - cache) is 10,000 - 7,600 - 0 - 100 = 2,300 B at the start and
  // 300 B less at the end: the peak stays the start's.
  const uint64_t seed = GENERATE(range(0, 200));
  INFO("seed " << seed);
  std::mt19937_64 g(seed);
  const auto uniform = [&](int64_t lo, int64_t hi) { return uniform_in(g, lo, hi); };
  MemorySnapshot start, before;
  for (const auto f : kRunFields) {
    start.*f = uniform(0, int64_t{1} << 40);
    before.*f = uniform(0, int64_t{1} << 40);
  }
  if (seed == 0) {
    start = MemorySnapshot{};
    start.capacity_bytes = 10'000;
    start.activation_bytes = 300;
    start.allocator_cache_bytes = 100;
    start.kv_live_bytes = 2'000;
    start.free_bytes = 10'000 - 2'400;
    before = MemorySnapshot{};
  }
  // The end as the pool builds it: the activations go back to the cache, nothing else moves.
  MemorySnapshot end = start;
  end.activation_bytes = 0;
  end.allocator_cache_bytes = start.allocator_cache_bytes + start.activation_bytes;
  end.torch_allocated_bytes = start.torch_allocated_bytes - start.activation_bytes;
  const SimTime t0 = uniform(10, 1'000'000);
  const SimTime t1 = t0 + uniform(0, 1'000'000);
  const bool history = g() % 2 == 0;  // a state before (peaks to beat or not), or none
  Recorder fused("p"), full("p");
  for (Recorder* r : {&fused, &full}) {
    r->set_kv_pool_bytes(int64_t{1} << 41);
    r->on_arrival(0);
    if (history) r->on_state(t0 / 2, before);
    r->on_state(t0, start);
    r->on_batch(3, 3, t1 - t0, 99);
  }
  fused.on_activations_released(t1, start);
  full.on_state(t1, end);
  for (Recorder* r : {&fused, &full}) {
    r->on_state(t1 + 5, before);
    serve_one(*r, t1 + 10);
  }
  const PolicySummary a = fused.finish(t1 + 10);
  const PolicySummary b = full.finish(t1 + 10);
  if (seed == 0) {
    CHECK(a.category_peaks_bytes[static_cast<int>(MemCategory::kAllocatorCache)] == 400);
    CHECK(a.peak_in_use_bytes == 2'300);
  }
  CHECK(summary_json({a}).dump() == summary_json({b}).dump());
}
