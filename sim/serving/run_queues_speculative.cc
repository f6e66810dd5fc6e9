// RunQueues' speculative decoding step (EngineConfig::speculative): how many tokens a decode
// schedules and how many KV slots it takes, as vLLM V1's Scheduler.schedule running loop and
// KVCacheManager.allocate_slots do (docs/models.md "Speculative decoding").
#include <algorithm>

#include "sim/serving/run_queues.h"

namespace kvsim {

bool RunQueues::speculate(RequestState& r, const IterationPlan& it, int64_t& target) const {
  // Each decode already in the plan took 1 + its drafts.
  const int64_t budget =
      max_batched_tokens_ - static_cast<int64_t>(it.decode.size()) - it.spec_tokens;
  if (budget <= 0) return false;
  const int64_t context = r.context_tokens();  // KV computed: context - 1; the last token is new
  // num_new_tokens = num_tokens_with_spec - num_computed_tokens = 1 + k, cut to the token budget
  // and so that no position passes max_model_len (max_model_len - 1 - num_computed_tokens).
  int64_t n = std::min(1 + spec_k_, budget);
  if (max_model_len_ > 0) n = std::min(n, max_model_len_ - context);
  n = std::max<int64_t>(n, 1);
  r.spec_drafts = n - 1;
  // allocate_slots: num_computed_tokens + num_new_tokens + num_lookahead_tokens slots, at most
  // max_model_len. Slots of drafts a step rejects stay allocated (vLLM only moves
  // num_computed_tokens back in update_from_output): the KV held never shrinks here.
  int64_t slots = context + r.spec_drafts + spec_lookahead_;
  if (max_model_len_ > 0) slots = std::min(slots, max_model_len_);
  target = std::max(slots, context);
  return true;
}

}  // namespace kvsim
