// RunQueues::walk_running: vLLM V1's running loop (Scheduler.schedule) as it is, for
// long_prefill_token_threshold. With the threshold a prefill takes at most that many tokens a
// step, so several partial prefills run at once, admitted among decoding requests; vLLM serves
// the running requests in running order, each as many tokens as it lacks (a prefill at most the
// threshold) within the token budget, and the order matters once the budget or the blocks run
// short. With speculative decoding a decode lacks 1 + its drafts (cut to the threshold too when
// that is smaller, as vLLM cuts every running request's new tokens) and its KV reaches its
// drafts' and the lookahead's slots (speculate_within). Without the threshold grow_decodes and
// admit_prefills' prefill walk take the same steps faster.
#include <algorithm>

#include "core/check.h"
#include "models/memory/kv_capabilities.h"
#include "sim/serving/run_queues.h"

namespace kvsim {

bool RunQueues::walk_running(IterationPlan& it, const BatchLimits& limits) {
  KVSIM_CHECK(decodes_->explicit_figures(), "the running walk in order has no decode aggregate");
  int64_t budget = limits.max_num_batched_tokens;
  // running_ as the walk started: preemption takes requests out of it (see grow_decodes).
  order_scratch_.assign(running_.begin(), running_.end());
  for (RequestState* rp : order_scratch_) {
    if (budget <= 0) break;
    RequestState& r = *rp;
    if (r.phase != Phase::kRunning) continue;  // preempted earlier in this walk
    const bool decoding = r.decoding();
    // Async scheduling: its last token is in flight (grow_decodes).
    if (decoding && (spec_k_ > 0 ? !spec_due(r) : r.generated >= r.spec.output_tokens)) continue;
    int64_t target = r.prompt_tokens + r.generated;  // a decode's KV
    if (decoding && spec_k_ > 0 &&
        !speculate_within(r, budget, limits.long_prefill_token_threshold, target)) {
      break;
    }
    const int64_t drafts = decoding && spec_k_ > 0 ? r.spec_drafts : 0;
    const int64_t chunk = decoding ? 1 + drafts
                                   : std::min({r.prefill_target - r.prefilled,
                                               limits.long_prefill_token_threshold, budget});
    bool self = false;
    while (true) {
      AllocResult a = AllocResult::success();
      if (decoding) {
        if (ledger_.defer(r, target)) break;
        ledger_.settle(r);
        a = ledger_.grow_decode(r, target);
        if (a) break;
      } else if (!stalled(r, chunk)) {
        a = ledger_.ensure(r, r.prefilled + chunk);
        if (a) break;
      }
      if (!decoding && !a && !preallocated_) {  // (admit_prefills': a live cudaMalloc failed)
        hooks_.oom(r.spec.id, a);
        return false;
      }
      if (!can_preempt()) {
        if (decoding) {
          hooks_.oom(r.spec.id, a);
          return false;
        }
        self = true;  // a prefill without blocks stalls, keeping its own (preemption off)
        break;
      }
      RequestState* victim = preemption_victim();
      // A victim already served this step gives its tokens back (vLLM: token_budget +=
      // num_scheduled_tokens.pop(...)).
      if (auto d = std::find(it.decode.begin(), it.decode.end(), victim); d != it.decode.end()) {
        budget += 1 + (spec_k_ > 0 ? victim->spec_drafts : 0);
      }
      if (auto p = std::find(it.prefill_ids.begin(), it.prefill_ids.end(), victim->spec.id);
          p != it.prefill_ids.end()) {
        const auto k = static_cast<size_t>(p - it.prefill_ids.begin());
        budget += it.prefill_chunks[k];
        it.prefill_ids.erase(p);
        it.prefill_chunks.erase(it.prefill_chunks.begin() + static_cast<std::ptrdiff_t>(k));
      }
      preempt(*victim, it);
      if (victim == rp) {
        self = true;
        break;
      }
    }
    if (self) {
      // vLLM ends the walk over the running requests here, and admits nothing after a
      // preemption (a stalled prefill, preemption off: the walk ends as admit_prefills' does).
      it.running_walk_ended = true;
      break;
    }
    if (decoding) {
      it.decode.push_back(rp);
      it.spec_tokens += drafts;
      it.decode_context += pool_.model().attended_tokens(r.context_tokens());
    } else {
      it.prefill_ids.push_back(r.spec.id);
      it.prefill_chunks.push_back(chunk);
    }
    budget -= chunk;
  }
  it.running_walk_ended = true;  // admit_prefills: the running prefills are served
  it.running_prefills = 0;
  it.decode_seqs = static_cast<int64_t>(it.decode.size());
  ledger_.report();
  return true;
}

}  // namespace kvsim
