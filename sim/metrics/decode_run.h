// DecodeRun: k decode steps of one batch taken at once (the fast-forward's quiet steps,
// sim/serving/fast_forward/stretch.cc), recorded by Recorder::on_decode_run. The run is described
// in closed form, so that one short pass over its steps (plan_steps: how many fit, their ends, and
// the sums the recorder's integrals need) is the only work that grows with its length.
//
// Step j (0-based) starts at t_j (t_0 = t, t_{j+1} = t_j + d_j) and lasts d_j =
// duration.ns_at(j): the affine decode step of a context growing by the same tokens each step
// (DecodeStepFixed::Walk), so d_j never falls. Its plan crosses into new blocks periodically:
// with p = crossed_in_period.size() (the block size, or 1 without crossings in aggregate) and P
// its last entry (a period's crossings), the blocks crossed into up to and including step j are
//   crossed(j) = (j / p)·P + crossed_in_period[j mod p],
// and swapped(j) likewise: the crossings of members whose each crossing also frees a block that
// left their sliding window (so they need no free block), counted apart from crossed(j).
// The memory state at step j's start is start(j) = start0 + j·per_step + crossed(j)·per_crossing
// + swapped(j)·per_swap (memory states are affine in the tokens added, the blocks crossed into
// and the swaps); at its end, start(j) + end_delta (its activations released).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/int128.h"
#include "core/sim_time.h"
#include "models/latency/latency_model.h"
#include "models/memory/memory_snapshot.h"

namespace kvsim {

struct DecodeRun {
  SimTime t = 0;
  int64_t seqs = 0;                // n: the batch's size and tokens
  int64_t steps = 0;               // k, set by plan_steps()
  DecodeStepFixed::Walk duration;  // at step 0
  // Cumulative over one period from step 0: crossed(j) and swapped(j) for j < p. Same size.
  std::span<const int64_t> crossed_in_period, swapped_in_period;
  MemorySnapshot start0, per_step, per_crossing, per_swap, end_delta;
  Int128 flops = 0;  // the steps' FLOPs (on_batch's fixed point), summed
  // plan_steps' results. Σ d_j, Σ j·d_j, Σ crossed(j)·d_j and Σ swapped(j)·d_j over the steps,
  // exact: every integral over the run is a combination of them. And each step's end after t,
  // t_{j+1} - t (in the buffer plan_steps was given).
  Int128 d_sum = 0, jd_sum = 0, xd_sum = 0, wd_sum = 0;
  std::span<const SimTime> elapsed;
  int64_t crossed_total = 0, swapped_total = 0;  // crossed(k - 1), swapped(k - 1)

  int64_t period() const { return static_cast<int64_t>(crossed_in_period.size()); }
  int64_t crossed(int64_t j) const { return in_periods(crossed_in_period, j); }
  int64_t swapped(int64_t j) const { return in_periods(swapped_in_period, j); }
  // Whether any step of the period swaps (else swapped(j) = 0 throughout).
  bool swaps() const { return swapped_in_period.back() != 0; }
  // t_j - t: when step j starts, after t (j <= steps).
  SimTime elapsed_before(int64_t j) const {
    return j == 0 ? 0 : elapsed[static_cast<size_t>(j - 1)];
  }
  // d_j (j < steps).
  SimTime duration_of(int64_t j) const { return elapsed_before(j + 1) - elapsed_before(j); }
  // start(j) (j < steps).
  MemorySnapshot start_state(int64_t j) const;
  // The periodic samples at first, first + period, ... (first > t) that fall inside the run's
  // steps, each with the step in flight then (the first to end at or after it): `out` becomes
  // their (time, step), in order. A sample at a step's end, which is the next step's start, is
  // not taken: whether it comes before or after that step's end event depends on when each was
  // scheduled. Returns how many steps may stay in the run: those before the step that ends at
  // such a sample (its samples are dropped from `out`), else all.
  int64_t samples_within(SimTime first, SimTime period,
                         std::vector<std::pair<SimTime, int64_t>>& out) const;

  // Takes the steps from 0 while each ends before `horizon` (a step ending at or after it would
  // be in flight when the next event comes) and the blocks crossed into so far stay within
  // `free_blocks` (a crosser might find none), at most `most` of them: sets steps, the sums and
  // elapsed (into `buffer`, which only grows).
  // Requires: the walk does not fall (its durations never decrease).
  void plan_steps(int64_t most, SimTime horizon, int64_t free_blocks, std::vector<SimTime>& buffer);

 private:
  static int64_t in_periods(std::span<const int64_t> cumulative, int64_t j) {
    const auto p = static_cast<int64_t>(cumulative.size());
    return (j / p) * cumulative.back() + cumulative[static_cast<size_t>(j % p)];
  }
  // Σ_j c(j)·d_j for c(j) = in_periods(cumulative, j), from the steps' ends; last = c(k - 1).
  // (plan_steps sums the crossings' in its pass over the steps when the period allows; this,
  // the swaps', and the crossings' otherwise.)
  Int128 sum_times_durations(std::span<const int64_t> cumulative, int64_t last) const;
};

}  // namespace kvsim
