// DecodeRun's pass over its steps (decode_run.h).
#include "sim/metrics/decode_run.h"

#include <algorithm>
#include <array>

#include "core/check.h"

namespace kvsim {

void DecodeRun::plan_steps(int64_t most, SimTime horizon, int64_t free_blocks,
                           std::vector<SimTime>& buffer) {
  KVSIM_CHECK(!crossed_in_period.empty() && swapped_in_period.size() == crossed_in_period.size(),
              "a decode run's crossing period has {} and {} entries", crossed_in_period.size(),
              swapped_in_period.size());
  KVSIM_CHECK(duration.ns_at(1) >= duration.ns_at(0), "a decode run's steps get shorter");
  // The first step whose crossings would pass free_blocks: crossed(j) never falls, and a
  // period adds P = crossed(p - 1). q = free / P whole periods fit; the next stops at its first
  // step whose crossings pass what is left.
  const int64_t p = period();
  const int64_t per_period = crossed_in_period.back();
  if (per_period > 0 &&
      free_blocks / per_period <= most / p) {  // else it does not bind (nor overflow)
    const int64_t q = free_blocks / per_period;
    const int64_t left = free_blocks - q * per_period;
    int64_t r = 0;
    while (crossed_in_period[static_cast<size_t>(r)] <= left) ++r;  // ends: the last is P > left
    most = std::min(most, q * p + r);
  }
  most = std::max<int64_t>(most, 0);
  if (buffer.size() < static_cast<size_t>(most)) buffer.resize(static_cast<size_t>(most));
  // The steps' ends after t, and their sum: Σ j·d_j = k·Σd - Σ_{i<k} (t_{i+1} - t). And, for
  // Σ crossed(j)·d_j by parts (sum_times_durations' comment), Σ_s c_s·(t_s - t) as the ends go:
  // end j (t_{j+1} - t) weighs c_{(j+1) mod p}, what step j + 1 adds; the last end, step k's
  // start, is taken back out at the end.
  SimTime* const ends = buffer.data();
  const SimTime budget = horizon - t;
  constexpr int64_t kChunk = 128;
  constexpr int64_t kMostPeriod = 256;  // block sizes; a longer period sums apart
  const bool crossings = per_period > 0 && p <= kMostPeriod;
  // c_m = c_{m mod p} for m in [0, kChunk + p): a chunk from step j reads its weights from
  // (j + 1) mod p on.
  std::array<int64_t, kChunk + kMostPeriod> adds;
  int64_t max_add = 0;
  if (crossings) {
    for (int64_t r = 0; r < p; ++r) {
      const int64_t c = crossed_in_period[static_cast<size_t>(r)] -
                        (r > 0 ? crossed_in_period[static_cast<size_t>(r - 1)] : 0);
      adds[static_cast<size_t>(r)] = c;
      max_add = std::max(max_add, c);
    }
    for (int64_t m = p; m < kChunk + p; ++m)
      adds[static_cast<size_t>(m)] = adds[static_cast<size_t>(m - p)];
  }
  // Chunk by chunk: when a bound shows that a whole chunk of steps ends before the next event,
  // its ends come from one tight loop (Walk::ends_before); the last few steps before the event
  // go one at a time, up to the step in flight when it comes.
  DecodeStepFixed::Walk walk = duration;
  SimTime e = 0;
  Int128 e_sum = 0, weighted = 0;
  int64_t j = 0;
  DecodeStepFixed::Walk::EndSums sums;
  // Near the event, chunks halve (down to 8 steps) so that few steps are left to go one by one.
  int64_t n = kChunk;
  while (j < most) {
    n = std::min(n, most - j);
    const int64_t* weights = crossings ? adds.data() + (j + 1) % p : nullptr;
    if (!walk.ends_before(ends + j, n, e, budget, weights, max_add, sums)) {
      if (n <= 8) break;
      n /= 2;
      continue;
    }
    j += n;
    e = ends[j - 1];
    e_sum += sums.ends;
    weighted += sums.weighted;
  }
  for (int64_t r = (j + 1) % p; j < most; ++j, r = r + 1 == p ? 0 : r + 1) {
    const SimTime next = e + walk.ns();
    if (next >= budget) break;  // in flight when the next event comes
    walk.next();
    e = next;
    e_sum += e;
    if (crossings) weighted += static_cast<Int128>(adds[static_cast<size_t>(r)]) * e;
    ends[j] = e;
  }
  steps = j;
  elapsed = std::span<const SimTime>(ends, static_cast<size_t>(j));
  d_sum = e;
  jd_sum = static_cast<Int128>(j) * e - e_sum;
  crossed_total = j > 0 ? crossed(j - 1) : 0;
  swapped_total = j > 0 ? swapped(j - 1) : 0;
  if (crossings && j > 0) weighted -= static_cast<Int128>(adds[static_cast<size_t>(j % p)]) * e;
  xd_sum = crossings ? static_cast<Int128>(crossed_total) * d_sum - weighted
                     : sum_times_durations(crossed_in_period, crossed_total);
  wd_sum = sum_times_durations(swapped_in_period, swapped_total);
}

MemorySnapshot DecodeRun::start_state(int64_t j) const {
  return snapshot_plus(snapshot_plus(snapshot_plus(start0, j, per_step), crossed(j), per_crossing),
                       swapped(j), per_swap);
}

int64_t DecodeRun::samples_within(SimTime first, SimTime period,
                                  std::vector<std::pair<SimTime, int64_t>>& out) const {
  KVSIM_CHECK(first > t && period >= 1, "samples from {} every {} ns in a run from {}", first,
              period, t);
  out.clear();
  auto from = elapsed.begin();
  for (SimTime at = first;; at += period) {
    const SimTime after = at - t;
    from = std::lower_bound(from, elapsed.end(), after);  // the first step to end at or after it
    if (from == elapsed.end()) return steps;              // past the run
    const auto j = static_cast<int64_t>(from - elapsed.begin());
    if (*from == after) {  // at step j's end: the run keeps the steps before j
      while (!out.empty() && out.back().second >= j) out.pop_back();
      return j;
    }
    out.emplace_back(at, j);
  }
}

Int128 DecodeRun::sum_times_durations(std::span<const int64_t> cumulative, int64_t last) const {
  // Summation by parts: with c_s = c(s) - c(s - 1) what step s adds (c(-1) = 0; last = c(k - 1)),
  //   Σ_j c(j)·d_j = Σ_s c_s·(t_k - t_s) = c(k - 1)·(t_k - t) - Σ_s c_s·(t_s - t),
  // and c_s repeats with the period: one pass per residue that adds anything, over its steps.
  if (steps == 0 || cumulative.back() == 0) return 0;
  const int64_t p = period();
  // A residue's starts sum in 64 bits when none can pass 2^62: at most steps / p + 1 of them,
  // each at most the last step's start (a 128-bit sum spilled to memory every step).
  const SimTime last_start = steps > 1 ? elapsed[static_cast<size_t>(steps - 2)] : 0;
  const bool narrow = static_cast<Int128>(steps / p + 1) * last_start < (Int128{1} << 62);
  // Σ (t_s - t) over the steps s of residue r (t_0 - t = 0), summed in `Sum`.
  const auto starts = [&]<typename Sum>(int64_t r) {
    Sum sum = 0;
    for (int64_t s = r == 0 ? p : r; s < steps; s += p) sum += elapsed[static_cast<size_t>(s - 1)];
    return static_cast<Int128>(sum);
  };
  Int128 added = 0;
  for (int64_t r = 0; r < p && r < steps; ++r) {
    const int64_t c =
        cumulative[static_cast<size_t>(r)] - (r > 0 ? cumulative[static_cast<size_t>(r - 1)] : 0);
    if (c == 0) continue;
    added +=
        (narrow ? starts.template operator()<int64_t>(r) : starts.template operator()<Int128>(r)) *
        c;
  }
  return static_cast<Int128>(last) * d_sum - added;
}

}  // namespace kvsim
