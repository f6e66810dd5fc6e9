// The schedulers an engine's `scheduler:` key may name, registered explicitly (static-initializer
// registration silently vanishes when a static library drops an unreferenced object file).
#include "sim/serving/scheduler.h"

namespace kvsim {

void register_schedulers(Registry<SchedulerFactory>& registry) {
  registry.add(
      {.name = "continuous",
       .description = "iteration-level batching; chunked_prefill splits prompts",
       .keys = {"max_num_seqs", "max_num_batched_tokens", "chunked_prefill",
                "scheduler_reserve_full_isl", "async_scheduling", "long_prefill_token_threshold"},
       .make = make_continuous_scheduler});
  registry.add({.name = "static",
                .description = "fixed batches of batch_size requests, run until all finish",
                .keys = {"batch_size", "max_num_batched_tokens"},
                .make = make_static_scheduler});
  registry.add({.name = "vllm_v0",
                .description = "vLLM V0's default step rule: a step that admits prompts runs "
                               "prefills only (decodes stall); no chunked prefill",
                .keys = {"max_num_seqs", "max_num_batched_tokens"},
                .make = make_vllm_v0_scheduler});
}

const Registry<SchedulerFactory>& scheduler_registry() {
  static const Registry<SchedulerFactory> registry = [] {
    Registry<SchedulerFactory> r("scheduler");
    register_schedulers(r);
    return r;
  }();
  return registry;
}

}  // namespace kvsim
