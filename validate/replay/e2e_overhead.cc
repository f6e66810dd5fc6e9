#include "validate/replay/e2e_overhead.h"

#include <fmt/format.h>

#include <algorithm>

#include "validate/backend.h"

namespace kvsim::validate {

namespace {

struct Probe {
  std::string name;
  int prefill_tokens = 0;  // one prompt of this many tokens, or
  int decode_seqs = 0;     // this many decode steps at `context` tokens each
  int context = 0;
};

}  // namespace

OverheadFit fit_iteration_overhead(IterationClock& clock, const LatencyModel& model,
                                   int block_tokens, int rounds) {
  const std::vector<Probe> probes = {
      {"decode 1 x 32", 0, 1, 32}, {"decode 4 x 64", 0, 4, 64}, {"prefill 16", 16, 0, 0}};
  OverheadFit fit;
  std::vector<double> remainders;
  int64_t next_id = 1'000'000;
  for (const Probe& p : probes) {
    BatchShape shape;
    shape.block_tokens = block_tokens;
    ClockBatch batch;
    std::vector<int64_t> ids;
    if (p.prefill_tokens > 0) {
      shape.prefill.push_back({p.prefill_tokens, 0, true});
      batch.prefill.push_back({next_id, 0, p.prefill_tokens, true});
      ids.push_back(next_id++);
    }
    for (int i = 0; i < p.decode_seqs; ++i) {
      shape.decode.push_back({p.context});  // the new token included
      batch.decode.push_back({next_id, p.context - 1, 1, true});
      ids.push_back(next_id++);
    }
    const IterationCost cost = model.iteration(shape);
    batch.shape = &shape;
    batch.modeled = &cost;
    std::vector<double> times;
    for (int r = 0; r < std::max(1, rounds); ++r) {
      times.push_back(clock.seconds(batch));
      for (int64_t id : ids) clock.release(id);
    }
    OverheadProbe o{p.name, percentile(times, 50), cost.ops_seconds};
    remainders.push_back(o.measured_s - o.ops_s);
    fit.probes.push_back(o);
  }
  fit.iteration_overhead_s = std::max(0.0, percentile(remainders, 50));
  return fit;
}

}  // namespace kvsim::validate
