#include "sim/metrics/decode_run_peaks.h"

#include <algorithm>

namespace kvsim {

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
    const int64_t v =
        f.at(j, x_before + run.crossed_in_period[r], w_before + run.swapped_in_period[r]);
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

}  // namespace kvsim
