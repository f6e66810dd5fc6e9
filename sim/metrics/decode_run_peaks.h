// The largest value of a memory figure over a DecodeRun's states, found without a pass over the
// run's steps (Recorder::on_decode_run's peaks: each category's, in use, KV held, driver used).
#pragma once

#include <cstdint>
#include <utility>

#include "sim/metrics/decode_run.h"

namespace kvsim {

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

// The largest f(start(j)) over the run and the first j with it (see the .cc for why a pass over
// at most one period finds it).
std::pair<int64_t, int64_t> start_max(const RunFigure& f, const DecodeRun& run);
// start_max's figure alone: with fs, fc and fw all >= 0 it is the last start's, however long
// the figure stays there.
int64_t start_top(const RunFigure& f, const DecodeRun& run);
// The largest figure among the run's starts and ends.
int64_t run_max(const RunFigure& f, const DecodeRun& run);
// max(peak, run_max(f)), skipping start_max's pass when the figure's bound stays at or below
// `peak`.
int64_t max_with_run(int64_t peak, const RunFigure& f, const DecodeRun& run);

}  // namespace kvsim
