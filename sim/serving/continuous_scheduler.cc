// The continuous (iteration-level) scheduler of Orca and vLLM V1 (Scheduler.schedule, step for
// step: docs/vllm-conformance.md): every iteration, swapped requests come back first, every
// decoding request grows by one token and unfinished prefills take their next chunk (a running
// request that gets no blocks preempts the policy's victim), and, in an iteration that preempted
// nothing, the token budget left goes to waiting requests (whole prompts, or chunks of them with
// chunked prefill; with scheduler_reserve_full_isl each only when its whole sequence fits).
#include "sim/serving/scheduler.h"

namespace kvsim {

namespace {

class ContinuousScheduler final : public Scheduler {
 public:
  bool plan(IterationPlan& it, const BatchLimits& limits, PlanSteps& steps) const override {
    if (steps.has_swapped()) steps.swap_in(it, limits);
    if (limits.long_prefill_token_threshold > 0 ? !steps.walk_running(it, limits)
                                                : !steps.grow_decodes(it)) {
      return false;
    }
    return steps.admit_prefills(it, limits);
  }
  // Decode-only with nothing admissible: swap_in is skipped, admit_prefills adds nothing. The
  // decodes walk first, then the prefills in the token budget they leave, with the blocks the
  // walk freed.
  bool closed_form_periods() const override { return true; }
  bool admits_nothing(const QueueView& queues, const BatchLimits& limits, int64_t decoding,
                      int64_t walk_frees) const override {
    return queues.prefills_blocked(limits, decoding, walk_frees);
  }
  bool plans_ahead() const override { return true; }
  bool runs_speculation() const override { return true; }
  bool caps_long_prefills() const override { return true; }
  // V0's scheduler with chunked prefill on runs the same budgeted, decode-first step.
  bool in_vllm_v0() const override { return true; }
};

}  // namespace

std::unique_ptr<Scheduler> make_continuous_scheduler() {
  return std::make_unique<ContinuousScheduler>();
}

}  // namespace kvsim
