// vLLM V0's default scheduler step rule (Scheduler._schedule_default in vllm/core/scheduler.py,
// the path taken without chunked prefill): when nothing is swapped out, waiting requests are
// admitted first, whole prompts within max_num_batched_tokens and max_num_seqs (the running ones
// count); if any was admitted, the step runs those prefills only and every decode stalls for it.
// Only a step that admits no prompt runs the decodes (and brings swapped requests back). Vidur's
// vllm replica scheduler (vidur/scheduler/replica_scheduler/vllm_replica_scheduler.py,
// _get_next_batch) builds its batches by the same rule.
//
// Where kvsim differs: V0 brings swapped requests back after the decodes and only in a step that
// preempted none; here they come back first, as in the continuous scheduler, so that they decode
// in the same step. chunked_prefill is ignored: V0's chunked path is another scheduler (V1's is
// `continuous`).
#include "sim/serving/scheduler.h"

namespace kvsim {

namespace {

class VllmV0Scheduler final : public Scheduler {
 public:
  bool plan(IterationPlan& it, const BatchLimits& limits, PlanSteps& steps) const override {
    if (!steps.has_swapped()) {
      BatchLimits whole = limits;
      whole.chunked_prefill = false;
      if (!steps.admit_prefills(it, whole)) return false;
      if (!it.prefill_ids.empty()) return true;  // a prefill step: the decodes wait
    }
    if (steps.has_swapped()) steps.swap_in(it, limits);
    return steps.grow_decodes(it);
  }
  // Nothing swapped and no whole prompt admissible: admit_prefills adds nothing, then the walk.
  // Whole prompts are tried before the walk, in the whole budget (the walk's frees come after).
  bool closed_form_periods() const override { return true; }
  bool admits_nothing(const QueueView& queues, const BatchLimits& limits, int64_t decoding,
                      int64_t walk_frees) const override {
    (void)decoding, (void)walk_frees;
    BatchLimits whole = limits;
    whole.chunked_prefill = false;
    return queues.prefills_blocked(whole, 0, 0);
  }
  bool in_vllm_v0() const override { return true; }
};

}  // namespace

std::unique_ptr<Scheduler> make_vllm_v0_scheduler() { return std::make_unique<VllmV0Scheduler>(); }

}  // namespace kvsim
