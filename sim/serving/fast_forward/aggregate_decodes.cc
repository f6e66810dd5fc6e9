#include "sim/serving/fast_forward/aggregate_decodes.h"

#include <algorithm>

#include "models/memory/gpu_memory_pool.h"
#include "models/memory/kv_capabilities.h"
#include "sim/serving/kv_ledger.h"
#include "sim/serving/run_queues.h"

namespace kvsim {

namespace {

void erase_request(std::vector<RequestState*>& v, const RequestState* r) {
  if (auto it = std::find(v.begin(), v.end(), r); it != v.end()) v.erase(it);
}

}  // namespace

AggregateDecodes::AggregateDecodes(RunQueues& queues, KvLedger& ledger, const GpuMemoryPool& pool)
    : queues_(queues), ledger_(ledger), pool_(pool) {
  lazy_.set_block_tokens(ledger_.crossings_in_aggregate() ? ledger_.block_tokens() : 0);
  lazy_.set_window(pool_.model().sliding_window.value_or(0));
  if (const PagedBlocks* paged = pool_.kv().paged()) {
    crossing_blocks_ = paged->blocks_to_allocate({}, 1);
  }
}

void AggregateDecodes::started_prefill(RequestState& r) { prefilling_.push_back(&r); }

void AggregateDecodes::prefilled(RequestState& r, bool done) {
  erase_request(prefilling_, &r);
  if (!done) lazy_.join(r);
}

void AggregateDecodes::leave(RequestState& r) {
  lazy_.leave(r, ledger_);  // its figures, as the walk would have them now
  if (r.phase == Phase::kRunning && !r.decoding()) erase_request(prefilling_, &r);
}

bool AggregateDecodes::grow(IterationPlan& it) {
  if (lazy_.needs_flush()) lazy_.flush(queues_.running(), ledger_);  // the last plan never ran
  lazy_.take_due(due_scratch_);
  return grow_due(it, due_scratch_);
}

void AggregateDecodes::commit(const IterationPlan& it, std::vector<int64_t>& done) {
  // A plan without the walk (a prefill-only step of vllm_v0 or static batching): the decodes
  // waited, no member grew.
  if (!lazy_.walked()) return;
  lazy_.commit(it.decode);
  lazy_.take_done(done);
}

bool AggregateDecodes::grow_due(IterationPlan& it, const std::vector<RequestState*>& due) {
  // RunQueues::grow_each_decode's per-request step for the due members only, in running order; the
  // walk would defer the others' tokens without a store call, and give the step's crossers (long
  // windows entering a full block) a block each in every KV cache group (end_walk counts both).
  // Each due member needs at most as many (it holds every token up to the last step's): when the
  // crossers might not all find theirs beside them, they join the explicit walk, so that a
  // shortage preempts where stepping's walk does.
  // Swappers (a sliding window's steady crossings: a block taken and one freed) need none.
  int64_t crossers = lazy_.crossers(), swappers = lazy_.swappers();
  const std::vector<RequestState*>* walk = &due;
  if (crossers > 0 && (crossers + static_cast<int64_t>(due.size())) * crossing_blocks_ >
                          pool_.kv().paged()->free_blocks()) {
    due_all_.assign(due.begin(), due.end());
    lazy_.take_crossers(due_all_);
    walk = &due_all_;
    crossers = swappers = 0;
  }
  lazy_.begin_walk();
  for (RequestState* rp : *walk) {
    RequestState& r = *rp;
    if (!LazyDecodes::member(r)) continue;  // preempted earlier in this walk
    lazy_.walk_at(r);
    const int64_t target = r.prompt_tokens + r.generated;
    // A long window reaching a new block: closed first, then the slow path as stepping's at the
    // end of a block's window (a replan of the same step defers nothing new: no-op).
    if (r.kv_long && target > r.kv_tokens) ledger_.settle(r);
    if (ledger_.defer(r, target)) {
      lazy_.grown(r);
      it.decode.push_back(rp);
      continue;
    }
    ledger_.settle(r);
    while (true) {
      AllocResult a = ledger_.grow_decode(r, target, lazy_.long_windows());
      if (a) {
        lazy_.grown(r);
        it.decode.push_back(rp);
        break;
      }
      if (!queues_.can_preempt()) {
        // The OOM records the state now: the members the walk has passed must hold their
        // step's token as they do when stepping (flush writes every member out by the walk's
        // rules and starts the aggregate again from there).
        lazy_.flush(queues_.running(), ledger_);
        queues_.oom(r.spec.id, a);
        return false;
      }
      RequestState* victim = queues_.preemption_victim();
      queues_.preempt(*victim, it);
      if (victim == rp) break;
    }
  }
  lazy_.end_walk(ledger_, crossers, swappers);
  it.decode_seqs = lazy_.size();
  it.decode_context = lazy_.attended_sum();
  it.running_prefills = static_cast<int64_t>(prefilling_.size());
  ledger_.report();
  return true;
}

}  // namespace kvsim
