// The static batching scheduler (FasterTransformer-style): up to batch_size waiting requests are
// prefilled together and whole, then decode until the last of them finishes; only then does the
// next batch start. The batch's limits are derived from the ones passed in, never written back.
#include "sim/serving/scheduler.h"

namespace kvsim {

namespace {

class StaticScheduler final : public Scheduler {
 public:
  bool plan(IterationPlan& it, const BatchLimits& limits, PlanSteps& steps) const override {
    if (steps.has_running()) {
      // A running batch decodes on. (A prefill left in it cannot happen: prefills are whole.)
      if (!steps.all_running_decode()) return steps.admit_prefills(it, limits);
      return steps.grow_decodes(it);
    }
    BatchLimits batch = limits;
    batch.max_num_seqs = limits.batch_size;
    batch.chunked_prefill = false;
    return steps.admit_prefills(it, batch);
  }
  // A running batch whose requests all decode: each plan is the walk alone, until it ends.
  bool closed_form_periods() const override { return true; }
  bool admits_nothing(const QueueView& queues, const BatchLimits& limits, int64_t decoding,
                      int64_t walk_frees) const override {
    (void)limits, (void)decoding, (void)walk_frees;
    return !queues.has_prefilling();
  }
};

}  // namespace

std::unique_ptr<Scheduler> make_static_scheduler() { return std::make_unique<StaticScheduler>(); }

}  // namespace kvsim
