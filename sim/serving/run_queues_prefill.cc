// RunQueues' prefill side: the running prefills' next chunks and the waiting queue's admissions
// (vLLM V1's two loops of Scheduler.schedule, after the decodes), and the checks the fast-forward
// asks of them (prefills_blocked). The queues themselves and the decode walk: run_queues.cc.
#include <algorithm>
#include <limits>

#include "core/check.h"
#include "models/memory/kv_capabilities.h"
#include "sim/serving/run_queues.h"

namespace kvsim {

bool RunQueues::admit_prefills(IterationPlan& it, const BatchLimits& limits) {
  int64_t budget = limits.max_num_batched_tokens - it.decode_seqs - it.spec_tokens;
  for (const int64_t c : it.prefill_chunks) budget -= c;  // walk_running's chunks
  // long_prefill_token_threshold caps every prefill's chunk (vLLM: both loops of schedule()).
  const int64_t cap = limits.long_prefill_token_threshold > 0 ? limits.long_prefill_token_threshold
                                                              : std::numeric_limits<int64_t>::max();
  const bool chunked = limits.chunked_prefill;
  // Unfinished chunked prefills of running requests go first.
  // Only prefilling running requests matter here: the walk stops after the last of the
  // it.running_prefills that grow_decodes counted (with none, the usual case of a full decode
  // batch, it is skipped) or when the budget is spent. Nothing in it changes running_ (an OOM
  // returns at once), so it reads running_ in place.
  int64_t prefills_left = it.running_prefills < 0 ? std::numeric_limits<int64_t>::max()
                                                  : it.running_prefills;  // -1: not counted
  // The running batch, or (the decode aggregate's) exactly the running requests this walk
  // visits, in the same order.
  const std::vector<RequestState*>& walk = decodes_->prefill_walk();
  if (it.running_walk_ended) prefills_left = 0;
  for (size_t i = 0; i < walk.size() && prefills_left > 0 && budget > 0; ++i) {
    RequestState& r = *walk[i];
    const int64_t id = r.spec.id;
    if (r.decoding()) continue;
    if (r.phase == Phase::kRunning) --prefills_left;  // as grow_decodes counted them
    if (r.prefilled >= r.prefill_target) continue;
    if (std::find(it.prefill_ids.begin(), it.prefill_ids.end(), id) != it.prefill_ids.end())
      continue;
    const int64_t chunk = std::min(r.prefill_target - r.prefilled, budget);
    // A prefill whose next chunk finds no blocks is treated as any running request is (vLLM V1's
    // running loop in Scheduler.schedule): the scheduling policy's victim is preempted until the
    // chunk fits, or until the victim is the prefill itself (the newest running request under
    // fcfs, so usually itself); then the walk ends. Without preemption it stalls and keeps its
    // blocks. A stalled prefill costs no failed allocation, whose error would describe the pool
    // for nobody.
    bool stop = false;                    // it stalled, or preempted itself: the walk ends
    const int64_t chunk_budget = budget;  // the chunk is fixed before any preemption
    while (true) {
      AllocResult a = AllocResult::success();
      if (!stalled(r, chunk_budget)) {
        a = ledger_.ensure(r, prefill_slots(r.prefilled + chunk));
        if (a) break;
        if (!preallocated_) {
          hooks_.oom(id, a);
          return false;
        }
      }
      if (!can_preempt()) {
        stop = true;
        break;
      }
      RequestState* victim = preemption_victim();
      const int64_t decoding = it.decode_seqs + it.spec_tokens;
      preempt(*victim, it);
      // A decode preempted after its growth gives its token back to the budget, as vLLM's
      // token_budget += num_scheduled_tokens.pop(...).
      decodes_->recount(it);
      budget += decoding - it.decode_seqs - it.spec_tokens;
      if (victim == &r) {
        stop = true;
        break;
      }
    }
    if (stop) break;
    it.prefill_ids.push_back(id);
    it.prefill_chunks.push_back(chunk);
    budget -= chunk;
  }
  // vLLM V1 visits the waiting queue only in a step that preempted nothing (Scheduler.schedule:
  // `if not preempted_reqs`).
  while (it.preempted == 0 && !waiting_->empty() && budget > 0 &&
         static_cast<int64_t>(running_.size()) < limits.max_num_seqs) {
    const int64_t id = waiting_->front();
    RequestState& r = requests_.at(id);
    const int64_t target = r.context_tokens();
    // Automatic prefix caching (vLLM v1): the leading tokens whose KV is cached are not computed
    // again; the prefill starts after them and attention reads them as context. A recompute
    // after preemption looks the cache up again.
    const PrefixHashes prefix{.hashes = r.spec.prefix_hashes,
                              .block_tokens = r.spec.hash_block_tokens,
                              .prompt_tokens = r.prompt_tokens,
                              .owner = r.spec.id};
    const PagedBlocks* paged = pool_.kv().paged();
    const bool lookup = paged != nullptr && paged->prefix_caching();
    const int64_t cached = lookup ? paged->cached_prefix_tokens(prefix, target) : 0;
    const bool nothing_else = running_.empty() && it.prefill_ids.empty() && swapped_->empty() &&
                              receiving_ == 0 && handing_off_ == 0 && loading_ == 0;
    const LoadStart load = offload_first(r, prefix, cached, target, nothing_else);
    if (load == LoadStart::kWait) break;
    if (load != LoadStart::kNone) continue;
    const int64_t todo = target - cached;
    // Without chunking a prompt runs whole; one longer than the budget runs alone.
    if (!chunked && todo > budget && !it.prefill_ids.empty()) break;
    const int64_t chunk = chunked ? std::min({todo, cap, budget}) : todo;
    // vLLM's can_allocate (the watermark): after this step's allocations so far. Cached blocks
    // are shared, not allocated: only the computed tokens need new blocks.
    if (hooks_.check_allocation) {
      const AllocFit fit = hooks_.check_allocation(r, chunk);
      if (fit == AllocFit::kNever) {
        hooks_.finish(id, Outcome::kRejectedTooLong);
        continue;
      }
      if (fit == AllocFit::kLater) break;  // FCFS: it blocks the ones behind it, as vLLM's
    }
    // vLLM V1's scheduler_reserve_full_isl: the free blocks must hold the whole sequence (less
    // its prefix hits), though only the chunk is allocated now. With nothing else holding
    // blocks, a sequence the whole pool cannot hold never runs.
    if (paged != nullptr && limits.reserve_full_sequence &&
        full_sequence_blocks(prefix, target, limits) > paged->free_blocks()) {
      if (nothing_else) {
        hooks_.finish(id, Outcome::kRejectedTooLong);
        continue;
      }
      break;
    }
    // A head that waits for blocks (a saturated server's usual state) is seen without a failed
    // allocation and its pool description: counted blocks, ceil(chunk / block) of them.
    const bool waits_for_blocks =
        paged != nullptr && !lookup && new_blocks(0, chunk) > paged->free_blocks() && !nothing_else;
    if (waits_for_blocks) break;
    AllocResult a =
        pool_.allocate_kv(id, cached + chunk, std::max(r.max_total_tokens(), target), prefix);
    if (!a) {
      if (!preallocated_) {
        hooks_.oom(id, a);
        return false;
      }
      // (KV held for transfers frees up when they end: not empty.)
      if (nothing_else) {
        hooks_.finish(id, Outcome::kRejectedTooLong);  // an empty pool cannot hold it
        continue;
      }
      break;  // wait for blocks to free up
    }
    waiting_->pop_front();
    KvLedger::forget(r);
    r.phase = Phase::kRunning;
    r.end_preemption(hooks_.now());
    r.prefill_target = target;
    r.prefilled = cached;
    if (lookup) count_lookup(r, target, cached, 0);
    enter_running(r);
    decodes_->started_prefill(r);
    if (hooks_.scheduled) hooks_.scheduled(r);
    it.prefill_ids.push_back(id);
    it.prefill_chunks.push_back(chunk);
    budget -= chunk;
  }
  return true;
}

bool RunQueues::stalled(const RequestState& r, int64_t budget, int64_t extra_free) const {
  const PagedBlocks* paged = pool_.kv().paged();
  if (paged == nullptr) return false;
  const int64_t chunk = std::min(r.prefill_target - r.prefilled, budget);
  return paged->blocks_to_grow(r.spec.id, prefill_slots(r.prefilled + chunk)) >
         paged->free_blocks() + extra_free;
}

int64_t RunQueues::full_sequence_blocks(const PrefixHashes& prefix, int64_t target,
                                        const BatchLimits& limits) const {
  return pool_.kv().paged()->admission_blocks(prefix, target, limits.max_num_batched_tokens);
}

int64_t RunQueues::new_blocks(int64_t cached, int64_t chunk) const {
  const int64_t bt = pool_.kv().paged()->block_tokens();
  return (cached + chunk + bt - 1) / bt - cached / bt;
}

bool RunQueues::prefills_blocked(const BatchLimits& limits, bool guarded, int64_t decoding,
                                 int64_t extra_free) const {
  const int64_t budget = limits.max_num_batched_tokens - decoding;
  if (budget <= 0) return true;
  // Only the first running prefill is ever tried (admit_prefills stops at its failed growth); its
  // chunk stays the same while `decoding` does. A stalled one is preempted where preemption is
  // possible: not a quiet step.
  if (const RequestState* p = first_prefilling();
      p != nullptr && (can_preempt() || !stalled(*p, budget, extra_free))) {
    return false;
  }
  if (waiting_->empty()) return true;
  if (static_cast<int64_t>(running_.size()) >= limits.max_num_seqs) return true;
  const PagedBlocks* paged = pool_.kv().paged();
  if (guarded || !preallocated_ || paged == nullptr) return false;
  // admit_prefills' first allocation for the head, with no prefill planned before it.
  const RequestState& r = requests_.at(waiting_->front());
  const int64_t target = r.context_tokens();
  const PrefixHashes prefix{.hashes = r.spec.prefix_hashes,
                            .block_tokens = r.spec.hash_block_tokens,
                            .prompt_tokens = r.prompt_tokens,
                            .owner = r.spec.id};
  const int64_t cached = paged->prefix_caching() ? paged->cached_prefix_tokens(prefix, target) : 0;
  const int64_t todo = target - cached;
  const int64_t chunk = limits.chunked_prefill ? std::min(todo, budget) : todo;
  // At least the blocks its prefix hits do not cover come off the free list. Evicting cached
  // blocks only shrinks the hits, which never lowers this count (see the fast-forward's notes).
  // With the full-sequence gate, those of its whole sequence.
  // (A sliding window caps the gate: then the chunk's, a lower bound.)
  const bool full = limits.reserve_full_sequence && !pool_.model().sliding_window.value_or(0);
  const int64_t need = new_blocks(cached, full ? todo : chunk);
  return need > paged->free_blocks() + extra_free;
}

}  // namespace kvsim
