// The continuous (iteration-level) scheduler of Orca and vLLM: every iteration, swapped requests
// come back first, every decoding request grows by one token (preempting the newest on a
// shortage), and the token budget left goes to unfinished prefills, then to waiting requests
// (whole prompts, or chunks of them with chunked prefill).
#include "sim/serving/scheduler.h"

namespace kvsim {

namespace {

class ContinuousScheduler final : public Scheduler {
 public:
  bool plan(IterationPlan& it, const BatchLimits& limits, PlanSteps& steps) const override {
    if (steps.has_swapped()) steps.swap_in(it, limits);
    if (!steps.grow_decodes(it)) return false;
    return steps.admit_prefills(it, limits);
  }
  // Decode-only with nothing admissible: swap_in is skipped, admit_prefills adds nothing.
  DecodeStretches decode_stretches() const override { return DecodeStretches::kDecodesFirst; }
};

}  // namespace

std::unique_ptr<Scheduler> make_continuous_scheduler() {
  return std::make_unique<ContinuousScheduler>();
}

}  // namespace kvsim
