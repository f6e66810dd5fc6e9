// What the kernel fit cannot see: the time a whole iteration spends outside the modelled kernels
// (the forward pass's bookkeeping, gathering the batch's block tables and positions, sampling,
// the elementwise kernels' floors on tiny batches). `kvsim-validate e2e` runs a few small whole
// iterations through the forward pass, subtracts the calibrated profile's kernel time
// (IterationCost::ops_seconds) and takes the median remainder as the profile's
// iteration_overhead_s: the same per-step term the latency model has for vLLM's scheduling,
// sampling and detokenising (docs/latency.md). Small batches, so the remainder is mostly the
// fixed cost and not a kernel error.
#pragma once

#include <string>
#include <vector>

#include "models/latency/latency_model.h"
#include "sim/serving/iteration_clock.h"

namespace kvsim::validate {

struct OverheadProbe {
  std::string name;       // e.g. "decode 1 x 32"
  double measured_s = 0;  // median over the rounds
  double ops_s = 0;       // the profile's kernel time of the same batch
};

struct OverheadFit {
  double iteration_overhead_s = 0;  // median of measured - ops over the probes, at least 0
  std::vector<OverheadProbe> probes;
};

// The probes: decode-only batches of 1 sequence at 32 tokens of context and 4 at 64, and one
// prefill of 16 tokens; each run `rounds` times (the median kept). Request ids from 1,000,000 up,
// released after each run.
OverheadFit fit_iteration_overhead(IterationClock& clock, const LatencyModel& model,
                                   int block_tokens, int rounds = 5);

}  // namespace kvsim::validate
