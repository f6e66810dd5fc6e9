// fast_forward_eligible: what the closed-form stretches (stretch.cc) cannot model, rule by rule.
#include "models/memory/kv_capabilities.h"
#include "models/memory/kv_store.h"
#include "sim/serving/engine_config.h"
#include "sim/serving/fast_forward/fast_forward.h"

namespace kvsim {

bool fast_forward_eligible(const EngineConfig& config, const Scheduler& scheduler, KvStore& kv,
                           bool walk_may_end_early) {
  return config.fast_forward &&
         // The V0 host path stamps each step's tokens in the next step.
         config.host_path != HostPath::kV0AsyncOutput &&
         // The scheduler says whether a period can run closed form (its plans admit nothing).
         scheduler.closed_form_periods() &&
         // The stretch counts blocks and defers growth on a paged store.
         kv.paged() != nullptr && kv.deferred_growth() != nullptr &&
         // A walk that may end before some decodes (priority; RunQueues::grow_decodes): the
         // aggregate's members would not all grow.
         !walk_may_end_early &&
         // Prefills among the decodes: the walk in running order has no aggregate.
         config.long_prefill_token_threshold == 0 &&
         // Speculative decoding's steps gain 1 + accepted tokens each, which the closed-form
         // stretches do not model: it steps every iteration.
         !config.speculative &&
         // KV offloading's loads and stores end at their own events.
         !config.kv_offloading;
}

}  // namespace kvsim
