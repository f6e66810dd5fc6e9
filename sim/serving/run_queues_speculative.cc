// RunQueues' speculative decoding step (EngineConfig::speculative): how many tokens a decode
// schedules and how many KV slots it takes, as vLLM V1's Scheduler.schedule running loop and
// KVCacheManager.allocate_slots do (docs/models.md "Speculative decoding").
#include <algorithm>

#include "sim/serving/run_queues.h"

namespace kvsim {

bool RunQueues::spec_due(const RequestState& r) const {
  // vLLM (AsyncScheduler): skipped when num_computed_tokens + 2 - num_output_placeholders >=
  // num_prompt_tokens + max_tokens, i.e. the tokens before the step in flight + 1.
  if (async_ && r.spec_last_gain > 0) {
    return r.generated - r.spec_last_gain + 1 < r.spec.output_tokens;
  }
  return r.generated < r.spec.output_tokens;
}

bool RunQueues::speculate(RequestState& r, const IterationPlan& it, int64_t& target) const {
  // Each decode already in the plan took 1 + its drafts.
  return speculate_within(
      r, max_batched_tokens_ - static_cast<int64_t>(it.decode.size()) - it.spec_tokens, 0, target);
}

bool RunQueues::speculate_within(RequestState& r, int64_t budget, int64_t threshold,
                                 int64_t& target) const {
  if (budget <= 0) return false;
  const int64_t context = r.context_tokens();
  // num_computed_tokens as vLLM's schedule() sees it: context - 1 (the last token is new), or,
  // planning ahead of the step that just ended, every token it scheduled counted as computed
  // (the tokens before it, then 1 + its drafts: placeholders), its rejections not yet known.
  const int64_t computed = async_ && r.spec_last_gain > 0
                               ? context - r.spec_last_gain + r.spec_last_drafts
                               : context - 1;
  // num_new_tokens = num_tokens_with_spec + placeholders - num_computed_tokens = 1 + k, cut to
  // long_prefill_token_threshold when it is smaller, to the token budget and so that no position
  // passes max_model_len (max_model_len - 1 - num_computed_tokens).
  int64_t n = 1 + spec_k_;
  if (threshold > 0) n = std::min(n, threshold);
  n = std::min(n, budget);
  if (max_model_len_ > 0) n = std::min(n, max_model_len_ - 1 - computed);
  n = std::max<int64_t>(n, 1);
  r.spec_drafts = static_cast<int32_t>(n - 1);
  // allocate_slots: num_computed_tokens + num_new_tokens + num_lookahead_tokens slots, at most
  // max_model_len. Slots of drafts a step rejects stay allocated (vLLM only moves
  // num_computed_tokens back in update_from_output): the KV held never shrinks here.
  int64_t slots = computed + n + spec_lookahead_;
  if (max_model_len_ > 0) slots = std::min(slots, max_model_len_);
  target = std::max(slots, context);
  return true;
}

void RunQueues::detach_finished(IterationPlan& it, const std::vector<int64_t>& finishing) {
  for (const int64_t id : finishing) {
    RequestState& r = requests_.at(id);
    const auto d = std::find(it.decode.begin(), it.decode.end(), &r);
    if (d == it.decode.end()) continue;
    it.decode.erase(d);
    --it.decode_seqs;
    it.spec_tokens -= r.spec_drafts;
    it.decode_context -= pool_.model().attended_tokens(r.context_tokens());
    it.finished_in_flight.push_back(
        {.id = id, .kv_before = r.context_tokens() - 1, .tokens = 1 + r.spec_drafts});
  }
}

}  // namespace kvsim
