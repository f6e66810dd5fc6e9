// Replica::fast_forward: the decode-only stretch in closed form (docs/architecture.md,
// "Fast-forward").
//
// While every running request decodes, nothing can be admitted and no event is due, each
// iteration is the same walk: every request grows by one token (almost always inside its open
// deferral window: no store call), the step takes latency(n, C) with C the batch's context sum,
// and the memory state is recorded at its start and end. Stepping does that walk per request per
// step; here each step costs a few scalar operations, and a request is touched only at its own
// events: when its window runs out (a new block: the same KvLedger calls grow_decodes makes, in
// the same order) and once at the end of the stretch, when it catches up with the steps it was
// not touched in.
//
// The stretch stops before the first step that is not such a walk, which then runs as an
// ordinary iteration: the step at whose end a request completes; the first step that would end at
// or after the next pending event (an arrival, a timeout, a sample, another replica's iteration:
// whatever it does must see the in-flight state it sees when stepping); a step whose new blocks
// might not all be free (it may preempt); a step whose activations do not fit (it OOMs).
//
// Identity with stepping (engine.fast_forward: false): every call that changes state or records
// it is made with the same arguments in the same order, except that the aggregate deferred tokens
// of a step go to the ledger in one sum (the store's totals are sums: its figures after the step's
// report() are the same), and the activation reservation, which no KV call affects on a
// preallocated store, is tried before the step's KV calls so that a failed one changes nothing.
// Step times come from the same latency call on the same integer shape, added to the clock one
// by one as the events would.
#include <algorithm>
#include <functional>
#include <limits>
#include <span>

#include "core/check.h"
#include "sim/serving/replica.h"

namespace kvsim {

void Replica::fast_forward() {
  // A timeline (observer) wants every step as its own slice: with one, the run steps (the
  // results are the same bits either way).
  if (!fast_forward_ok_ || check_ || busy_ || down_ || kick_pending_ || observer_) return;
  const SimTime t0 = events_.now();
  const SimTime horizon = events_.next_time();
  if (horizon <= t0) return;  // something else happens now: the next iteration must see it
  if (admission_.size() != 0 || queues_.has_swapped()) return;
  const std::vector<RequestState*>& running = queues_.running();
  if (running.empty()) return;
  const PagedBlocks& paged = *pool_.kv().paged();
  // Every running request decodes, or prefills and stays stalled: its next chunk's blocks are
  // not free (a memory-bound server's usual state: the prefill waits for a completion while the
  // batch decodes). Only the first such request in running order is ever tried (admit_prefills
  // stops at its failed growth); its chunk is the same at every step (the decode count, hence the
  // token budget, does not change) and free blocks only shrink, so it stays stalled.
  int64_t n = 0;
  const RequestState* stalled = nullptr;
  for (const RequestState* r : running) {
    if (r->decoding()) {
      ++n;
    } else if (stalled == nullptr) {
      stalled = r;
    }
  }
  if (n == 0) return;
  if (stalled != nullptr) {
    const int64_t budget = limits_.max_num_batched_tokens - n;
    if (budget > 0) {
      const int64_t chunk = std::min(stalled->prefill_target - stalled->prefilled, budget);
      if (paged.blocks_to_grow(stalled->spec.id, stalled->prefilled + chunk) <= paged.free_blocks()) {
        return;  // its chunk runs next step
      }
    }
  }
  // Waiting requests that cannot be admitted now stay so: free blocks only shrink in a stretch.
  if (!queues_.admission_blocked(limits_, admission_.has_guards(), n)) return;

  // Per request, once: the step at whose end it completes, its context, and the first step at
  // which it needs the ledger (its window runs out). ff_synced_[p]: the last step whose plan
  // running[p]'s RequestState reflects (0: the one that just ended). Step j's plan sees
  // generated = (generated now) + j - 1, so its target is context_tokens() + j - 1.
  int64_t first_done = std::numeric_limits<int64_t>::max();
  int64_t context = 0;
  const auto slots = static_cast<int64_t>(running.size());
  ff_synced_.assign(static_cast<size_t>(slots), 0);
  ff_due_.clear();
  for (const RequestState* r : running) {
    if (!r->decoding()) continue;
    first_done = std::min(first_done, r->spec.output_tokens - r->generated);
    context += r->context_tokens();
  }
  if (first_done <= 1) return;  // a request completes at the end of the next step
  BatchShape shape;
  shape.block_tokens = static_cast<int>(paged.block_tokens());
  shape.decode_seqs = n;
  // The loop below stops at step 1 when that step would end at or after the horizon: found
  // here, before the per-request windows are gathered, it costs one latency call (a short
  // stretch between arrivals is the common case on a saturated trace).
  shape.decode_context_tokens = context;
  if (t0 + std::max<SimTime>(1, seconds_to_sim(latency_.iteration(shape, OpDetail::kTotals).seconds)) >=
      horizon) {
    return;
  }
  for (int64_t p = 0; p < slots; ++p) {
    const RequestState& r = *running[static_cast<size_t>(p)];
    if (!r.decoding()) continue;
    // A window that holds exactly the tokens up to the last step's target defers one token a
    // step for kv_room steps; any other state goes through the ledger at the next step. Only
    // steps before first_done can run here.
    const bool lazy = r.kv_tokens > 0 && r.kv_tokens == r.context_tokens() - 1;
    const int64_t due = lazy ? r.kv_room + 1 : 1;
    if (due < first_done) ff_due_.emplace_back(due, static_cast<int32_t>(p));
  }
  std::make_heap(ff_due_.begin(), ff_due_.end(), std::greater<>());

  SimTime t = t0;
  int64_t step = 0;  // steps done
  for (int64_t j = 1; j < first_done; ++j) {
    // The requests that need the ledger at step j, in running order (grow_decodes' walk order).
    ff_now_.clear();
    while (!ff_due_.empty() && ff_due_.front().first == j) {
      std::pop_heap(ff_due_.begin(), ff_due_.end(), std::greater<>());
      ff_now_.push_back(ff_due_.back().second);
      ff_due_.pop_back();
    }
    // Each needs at most one new block (it holds every token up to the last step's).
    const auto needing = static_cast<int64_t>(ff_now_.size());
    const bool fits = needing <= paged.free_blocks();
    const int64_t step_context = context + (j - 1) * n;
    shape.decode_context_tokens = step_context;
    const IterationCost cost = latency_.iteration(shape, OpDetail::kTotals);
    const SimTime end = t + std::max<SimTime>(1, seconds_to_sim(cost.seconds));
    if (!fits || end >= horizon ||
        !pool_.reserve_activations(std::span<const BatchChunk>{}, n, step_context)) {
      break;  // step j runs as an ordinary iteration
    }
    std::sort(ff_now_.begin(), ff_now_.end());
    for (int32_t p : ff_now_) {
      RequestState& r = *running[static_cast<size_t>(p)];
      const int64_t behind = (j - 1) - ff_synced_[static_cast<size_t>(p)];
      r.generated += behind;
      KvLedger::catch_up(r, behind);
      // grow_decodes' step for one request.
      const int64_t target = r.context_tokens();
      if (!ledger_.defer(r, target)) {
        ledger_.settle(r);
        const AllocResult a = ledger_.grow_decode(r, target);
        KVSIM_CHECK(a, "fast-forward: request {} found no free block at step {}", r.spec.id, j);
      }
      ++r.generated;  // its token of step j (end_iteration's increment)
      ff_synced_[static_cast<size_t>(p)] = j;
      const bool lazy = r.kv_tokens > 0 && r.kv_tokens == target;
      const int64_t due = lazy ? j + r.kv_room + 1 : j + 1;
      if (due < first_done) {
        ff_due_.emplace_back(due, p);
        std::push_heap(ff_due_.begin(), ff_due_.end(), std::greater<>());
      }
    }
    ledger_.defer_many(n - needing);
    ledger_.report();
    recorder_.on_state(t, pool_.snapshot());
    recorder_.on_batch(n, n, end - t, cost.flops);  // start_iteration's record of a decode step
    // The iteration's end.
    t = end;
    recorder_.on_fast_forward_iteration();
    pool_.release_activations();
    recorder_.on_state(t, pool_.snapshot());
    step = j;
  }
  if (step == 0) return;
  // Every request catches up with the steps it was not touched in.
  for (int64_t p = 0; p < slots; ++p) {
    RequestState& r = *running[static_cast<size_t>(p)];
    if (!r.decoding()) continue;
    const int64_t behind = step - ff_synced_[static_cast<size_t>(p)];
    r.generated += behind;
    KvLedger::catch_up(r, behind);
  }
  events_.advance_to(t);
}

}  // namespace kvsim
