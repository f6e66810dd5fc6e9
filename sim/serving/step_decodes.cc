#include "sim/serving/step_decodes.h"

#include "models/memory/gpu_memory_pool.h"
#include "sim/serving/kv_ledger.h"
#include "sim/serving/run_queues.h"

namespace kvsim {

bool StepDecodes::grow(IterationPlan& it) {
  // Walks the running batch as it was when the walk started. Until the first preemption nothing
  // changes it, so the walk reads it in place; preemption removes requests from it, so the walk
  // switches to a copy just before the first one (the same order either way, without copying
  // the batch every iteration). Preempted ones stay in the replica's requests (so the addresses
  // stay valid); their phase tells them apart. Only an OOM removes requests, and it ends the walk.
  const std::vector<RequestState*>& running = queues_.running();
  const std::vector<RequestState*>* order = &running;
  int64_t prefilling = 0;
  bool stopped = false;
  for (size_t i = 0; i < order->size(); ++i) {
    RequestState* rp = (*order)[i];
    RequestState& r = *rp;
    if (r.phase != Phase::kRunning) continue;
    if (!r.decoding()) {
      ++prefilling;
      continue;
    }
    // Async scheduling: its last token is in flight (it finishes when that step's output comes;
    // vLLM's schedule() skips a request whose placeholders reach max_tokens). Never the case when
    // plans wait for the step before.
    if (r.generated >= r.spec.output_tokens) continue;
    const int64_t target = r.prompt_tokens + r.generated;
    // The usual step stays inside the last block: no store call (deferred growth), and the
    // same figures as the slow path's (usage() counts the token at once; see DeferredGrowth).
    if (ledger_.defer(r, target)) {
      it.decode.push_back(rp);
      it.decode_context += pool_.model().attended_tokens(r.context_tokens());
      continue;
    }
    ledger_.settle(r);
    while (true) {
      AllocResult a = ledger_.grow_decode(r, target);
      if (a) {
        it.decode.push_back(rp);
        it.decode_context += pool_.model().attended_tokens(r.context_tokens());
        break;
      }
      if (!queues_.can_preempt()) {
        queues_.oom(r.spec.id, a);
        return false;
      }
      if (order == &running) {
        order_scratch_.assign(running.begin(), running.end());
        order = &order_scratch_;
      }
      RequestState* victim = queues_.preemption_victim();
      queues_.preempt(*victim, it);
      if (victim == rp) {
        // vLLM ends its walk over the running requests at one that preempted itself. Under
        // fcfs it is the last one anyway; under priority the ones after it wait this step out
        // (the decode aggregate is off under priority: its members all grow every step).
        stopped = policy_ == EngineConfig::SchedulingPolicy::kPriority;
        break;
      }
    }
    if (stopped) {
      it.running_walk_ended = true;
      break;
    }
  }
  it.running_prefills = prefilling;
  it.decode_seqs = static_cast<int64_t>(it.decode.size());
  ledger_.report();
  return true;
}

void StepDecodes::commit(const IterationPlan& it, std::vector<int64_t>& done) {
  for (RequestState* rp : it.decode) {
    RequestState& r = *rp;
    if (r.phase != Phase::kRunning) continue;
    ++r.generated;
    if (r.generated >= r.spec.output_tokens) done.push_back(r.spec.id);
  }
}

const std::vector<RequestState*>& StepDecodes::prefill_walk() const { return queues_.running(); }

const RequestState* StepDecodes::first_prefilling() const {
  for (const RequestState* r : queues_.running()) {
    if (!r->decoding()) return r;
  }
  return nullptr;
}

}  // namespace kvsim
