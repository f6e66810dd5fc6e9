#include "sim/serving/run_queues.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "core/check.h"
#include "models/memory/kv_capabilities.h"

namespace kvsim {

namespace {

template <class C, class V>
void erase_from(C& c, const V& v) {
  if (auto it = std::find(c.begin(), c.end(), v); it != c.end()) c.erase(it);
}

}  // namespace

RunQueues::RunQueues(std::unordered_map<int64_t, RequestState>& requests, GpuMemoryPool& pool,
                     KvLedger& ledger, Recorder& recorder, const EngineConfig& config, Hooks hooks)
    : requests_(requests),
      pool_(pool),
      ledger_(ledger),
      recorder_(recorder),
      preemption_(config.preemption),
      policy_(config.scheduling_policy),
      swap_space_bytes_(config.swap_space_bytes),
      preallocated_(pool.kv().preallocated()),
      hooks_(std::move(hooks)) {
  if (const PagedBlocks* paged = pool.kv().paged(); paged != nullptr && paged->prefix_caching()) {
    recorder_.on_prefix_caching();  // the summary reports prefix hits for this policy
  }
}

void RunQueues::set_lazy(bool on) {
  if (on == lazy_on_) return;
  KVSIM_CHECK(size() == 0, "the decode aggregate is switched with requests admitted");
  lazy_on_ = on;
  lazy_.set_block_tokens(on && ledger_.crossings_in_aggregate() ? ledger_.block_tokens() : 0);
  lazy_.set_window(on ? pool_.model().sliding_window.value_or(0) : 0);
}

const RequestState* RunQueues::first_prefilling() const {
  if (lazy_on_) return prefilling_.empty() ? nullptr : prefilling_.front();
  for (const RequestState* r : running_) {
    if (!r->decoding()) return r;
  }
  return nullptr;
}

const RequestState* RunQueues::last_decoding() const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if ((*it)->decoding()) return *it;
  }
  return nullptr;
}

void RunQueues::prefilled(RequestState& r, bool done) {
  if (hooks_.observe) hooks_.observe(r, RequestEventKind::kPrefillDone);
  if (!lazy_on_) return;
  erase_from(prefilling_, &r);
  if (!done) lazy_.join(r);
}

void RunQueues::commit_lazy(const IterationPlan& it, std::vector<int64_t>& done) {
  // A plan without the walk (a prefill-only step of vllm_v0 or static batching): the decodes
  // waited, no member grew.
  if (!lazy_.walked()) return;
  lazy_.commit(it.decode);
  lazy_.take_done(done);
}

bool RunQueues::all_running_decode() const {
  return std::all_of(running_.begin(), running_.end(),
                     [](const RequestState* r) { return r->decoding(); });
}

bool RunQueues::before(const RequestState& a, const RequestState& b) const {
  const auto key = [this](const RequestState& r) {
    const int64_t first = policy_ == EngineConfig::SchedulingPolicy::kPriority ? r.spec.priority
                                                                               : r.prompt_tokens;
    return std::tuple(first, r.spec.arrival, r.spec.id);
  };
  return key(a) < key(b);
}

void RunQueues::enqueue_waiting(int64_t id, bool front) {
  if (policy_ == EngineConfig::SchedulingPolicy::kFcfs) {
    if (front) waiting_.push_front(id);
    else waiting_.push_back(id);
    return;
  }
  const RequestState& r = requests_.at(id);
  const auto at = std::upper_bound(waiting_.begin(), waiting_.end(), id,
                                   [&](int64_t, int64_t other) { return before(r, requests_.at(other)); });
  waiting_.insert(at, id);
}

void RunQueues::enqueue_swapped(int64_t id) {
  if (policy_ == EngineConfig::SchedulingPolicy::kFcfs) {
    swapped_.push_back(id);
    return;
  }
  const RequestState& r = requests_.at(id);
  const auto at = std::upper_bound(swapped_.begin(), swapped_.end(), id,
                                   [&](int64_t, int64_t other) { return before(r, requests_.at(other)); });
  swapped_.insert(at, id);
}

RequestState* RunQueues::preemption_victim() const {
  KVSIM_CHECK(!running_.empty(), "no running request to preempt");
  if (policy_ != EngineConfig::SchedulingPolicy::kPriority) return running_.back();
  // The largest (priority, arrival): the lowest priority, the latest arrival among equals, and
  // the first in running order among exact ties (vLLM V1: max(self.running, key=lambda r:
  // (r.priority, r.arrival_time)); max_element also keeps the first of equal maxima).
  return *std::max_element(running_.begin(), running_.end(),
                           [](const RequestState* a, const RequestState* b) {
                             return std::tuple(a->spec.priority, a->spec.arrival) <
                                    std::tuple(b->spec.priority, b->spec.arrival);
                           });
}

void RunQueues::admit(RequestState& r) {
  r.phase = Phase::kWaiting;
  enqueue_waiting(r.spec.id, false);
}

void RunQueues::admit_transferred(RequestState& r) {
  r.phase = Phase::kSwapped;
  r.swapped_tokens = r.context_tokens();  // the prompt and the first token
  enqueue_swapped(r.spec.id);
}

void RunQueues::receive(RequestState& r) {
  KVSIM_CHECK(r.phase == Phase::kReceiving, "request {} received while not receiving", r.spec.id);
  --receiving_;
  r.phase = Phase::kRunning;
  enter_running(r);
  if (lazy_on_) lazy_.join(r);  // decoding at once
}

void RunQueues::hand_off(RequestState& r) {
  KVSIM_CHECK(r.phase == Phase::kRunning, "request {} handed off while not running", r.spec.id);
  erase_from(running_, &r);
  ledger_.settle(r);
  r.phase = Phase::kHandingOff;
  ++handing_off_;
}

void RunQueues::remove(RequestState& r) {
  switch (r.phase) {
    case Phase::kWaiting: erase_from(waiting_, r.spec.id); break;
    case Phase::kRunning:
      erase_from(running_, &r);
      if (lazy_on_ && !r.decoding()) erase_from(prefilling_, &r);
      break;
    case Phase::kSwapped:
      if (!r.kv_transferred) swap_used_bytes_ -= r.swapped_tokens * pool_.kv().kv_bytes_per_token();
      erase_from(swapped_, r.spec.id);
      break;
    case Phase::kReceiving: --receiving_; break;
    case Phase::kHandingOff: --handing_off_; break;
    case Phase::kGuardQueue:
    case Phase::kDone: break;
  }
}

void RunQueues::unswap_oldest() {
  const int64_t id = swapped_.front();
  RequestState& r = requests_.at(id);
  swapped_.pop_front();
  // A transferred request that cannot fit even alone computes its KV again here instead.
  const bool abandoned = r.kv_transferred;
  if (!r.kv_transferred) swap_used_bytes_ -= r.swapped_tokens * pool_.kv().kv_bytes_per_token();
  r.kv_transferred = false;
  r.phase = Phase::kWaiting;
  enqueue_waiting(id, true);
  if (abandoned && hooks_.abandoned) hooks_.abandoned(r);
}

bool RunQueues::grow_decodes(IterationPlan& it) {
  if (lazy_on_) {
    if (lazy_.needs_flush()) lazy_.flush(running_, ledger_);  // the last plan never ran
    lazy_.take_due(due_scratch_);
    return grow_lazy(it, due_scratch_);
  }
  // Walks running_ as it was when the walk started. Until the first preemption nothing changes
  // running_, so the walk reads it in place; preemption removes requests from it, so the walk
  // switches to a copy just before the first one (the same order either way, without copying
  // the batch every iteration). Preempted ones stay in requests_ (so the addresses stay valid);
  // their phase tells them apart. Only an OOM removes requests, and it ends the walk.
  const std::vector<RequestState*>* order = &running_;
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
      if (!can_preempt()) {
        hooks_.oom(r.spec.id, a);
        return false;
      }
      if (order == &running_) {
        order_scratch_.assign(running_.begin(), running_.end());
        order = &order_scratch_;
      }
      RequestState* victim = preemption_victim();
      preempt(*victim, it);
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

bool RunQueues::grow_lazy(IterationPlan& it, const std::vector<RequestState*>& due) {
  // grow_decodes' per-request step for the due members only, in running order; the walk would
  // defer the others' tokens without a store call, and give the step's crossers (long windows
  // entering a full block) a block each (end_walk counts both). Each due member needs at most
  // one block (it holds every token up to the last step's): when the crossers might not all find
  // one beside them, they join the explicit walk, so that a shortage preempts where stepping's
  // walk does.
  // Swappers (a sliding window's steady crossings: a block taken and one freed) need none.
  int64_t crossers = lazy_.crossers(), swappers = lazy_.swappers();
  const std::vector<RequestState*>* walk = &due;
  if (crossers > 0 && crossers + static_cast<int64_t>(due.size()) > pool_.kv().paged()->free_blocks()) {
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
      if (!can_preempt()) {
        // The OOM records the state now: the members the walk has passed must hold their
        // step's token as they do when stepping (flush writes every member out by the walk's
        // rules and starts the aggregate again from there).
        lazy_.flush(running_, ledger_);
        hooks_.oom(r.spec.id, a);
        return false;
      }
      RequestState* victim = preemption_victim();
      preempt(*victim, it);
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

bool RunQueues::admit_prefills(IterationPlan& it, const BatchLimits& limits) {
  int64_t budget = limits.max_num_batched_tokens - it.decode_seqs;
  const bool chunked = limits.chunked_prefill;
  // Unfinished chunked prefills of running requests go first.
  // Only prefilling running requests matter here: the walk stops after the last of the
  // it.running_prefills that grow_decodes counted (with none, the usual case of a full decode
  // batch, it is skipped) or when the budget is spent. Nothing in it changes running_ (an OOM
  // returns at once), so it reads running_ in place.
  int64_t prefills_left = it.running_prefills < 0 ? std::numeric_limits<int64_t>::max()
                                                  : it.running_prefills;  // -1: not counted
  // With the aggregate, prefilling_ holds exactly the running requests this walk visits, in the
  // same order.
  const std::vector<RequestState*>& walk = lazy_on_ ? prefilling_ : running_;
  if (it.running_walk_ended) prefills_left = 0;
  for (size_t i = 0; i < walk.size() && prefills_left > 0 && budget > 0; ++i) {
    RequestState& r = *walk[i];
    const int64_t id = r.spec.id;
    if (r.decoding()) continue;
    if (r.phase == Phase::kRunning) --prefills_left;  // as grow_decodes counted them
    if (r.prefilled >= r.prefill_target) continue;
    if (std::find(it.prefill_ids.begin(), it.prefill_ids.end(), id) != it.prefill_ids.end()) continue;
    const int64_t chunk = std::min(r.prefill_target - r.prefilled, budget);
    // A prefill whose next chunk finds no blocks is treated as any running request is (vLLM V1's
    // running loop in Scheduler.schedule): the scheduling policy's victim is preempted until the
    // chunk fits, or until the victim is the prefill itself (the newest running request under
    // fcfs, so usually itself); then the walk ends. Without preemption it stalls and keeps its
    // blocks. A stalled prefill costs no failed allocation, whose error would describe the pool
    // for nobody.
    bool stop = false;  // it stalled, or preempted itself: the walk ends
    const int64_t chunk_budget = budget;  // the chunk is fixed before any preemption
    while (true) {
      AllocResult a = AllocResult::success();
      if (!stalled(r, chunk_budget)) {
        a = ledger_.ensure(r, r.prefilled + chunk);
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
      const int64_t decoding = it.decode_seqs;
      preempt(*victim, it);
      // A decode preempted after its growth gives its token back to the budget, as vLLM's
      // token_budget += num_scheduled_tokens.pop(...).
      it.decode_seqs = lazy_on_ ? lazy_.size() : static_cast<int64_t>(it.decode.size());
      if (lazy_on_) it.decode_context = lazy_.attended_sum();
      budget += decoding - it.decode_seqs;
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
  while (it.preempted == 0 && !waiting_.empty() && budget > 0 &&
         static_cast<int64_t>(running_.size()) < limits.max_num_seqs) {
    const int64_t id = waiting_.front();
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
    const int64_t todo = target - cached;
    // Without chunking a prompt runs whole; one longer than the budget runs alone.
    if (!chunked && todo > budget && !it.prefill_ids.empty()) break;
    const int64_t chunk = chunked ? std::min(todo, budget) : todo;
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
    const bool nothing_else =
        running_.empty() && it.prefill_ids.empty() && swapped_.empty() && receiving_ == 0 &&
        handing_off_ == 0;
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
    waiting_.pop_front();
    KvLedger::forget(r);
    r.phase = Phase::kRunning;
    r.end_preemption(hooks_.now());
    r.prefill_target = target;
    r.prefilled = cached;
    // Counted at admission, for requests never preempted, as vLLM's PrefixCacheStats (a
    // recompute's lookup goes to its separate preempted_* figures, which kvsim does not report).
    if (lookup && r.preemptions == 0) {
      recorder_.on_prefix_lookup(target, cached, cached / paged->block_tokens());
    }
    enter_running(r);
    if (lazy_on_) prefilling_.push_back(&r);
    if (hooks_.scheduled) hooks_.scheduled(r);
    it.prefill_ids.push_back(id);
    it.prefill_chunks.push_back(chunk);
    budget -= chunk;
  }
  return true;
}

void RunQueues::preempt(RequestState& r, IterationPlan& it) {
  const int64_t id = r.spec.id;
  ++it.preempted;
  if (lazy_on_) {
    lazy_.leave(r, ledger_);  // its figures, as the walk would have them now
    if (!r.decoding()) erase_from(prefilling_, &r);
  }
  recorder_.on_preemption();
  ++r.preemptions;
  r.preempted_at = hooks_.now();
  erase_from(running_, &r);
  if (auto d = std::find(it.decode.begin(), it.decode.end(), &r); d != it.decode.end()) {
    it.decode.erase(d);
    // (With the aggregate, the count and the sum are taken at the end of the walk.)
    it.decode_context -= pool_.model().attended_tokens(r.context_tokens());
  }
  const int64_t tokens = ledger_.release(r);
  const int64_t bytes = tokens * pool_.kv().kv_bytes_per_token();
  r.prefilled = 0;
  if (hooks_.preempted) hooks_.preempted(r);  // its KV is free now
  if (preemption_ == EngineConfig::Preemption::kSwap &&
      swap_used_bytes_ + bytes <= swap_space_bytes_ && r.generated > 0) {
    swap_used_bytes_ += bytes;
    r.swapped_tokens = tokens;
    r.phase = Phase::kSwapped;
    enqueue_swapped(id);
    it.extra_seconds += static_cast<double>(bytes) / pool_.gpu().pcie_bytes_per_s;
  } else {
    r.phase = Phase::kWaiting;  // recompute: prefill again over prompt + generated
    enqueue_waiting(id, true);
  }
  if (hooks_.observe) hooks_.observe(r, RequestEventKind::kPreempted);
}

void RunQueues::swap_in(IterationPlan& it, const BatchLimits& limits) {
  // Requests receiving their KV join the batch when their transfer ends: they count already.
  while (!swapped_.empty() && static_cast<int64_t>(running_.size()) + receiving_ < limits.max_num_seqs) {
    const int64_t id = swapped_.front();
    RequestState& r = requests_.at(id);
    if (!pool_.allocate_kv(id, r.swapped_tokens, std::max(r.max_total_tokens(), r.swapped_tokens))) break;
    swapped_.pop_front();
    KvLedger::forget(r);
    r.prefill_target = r.swapped_tokens;
    r.prefilled = r.swapped_tokens;  // decoding at once
    if (r.kv_transferred) {  // the decode side pulls: the KV crosses the link now
      r.kv_transferred = false;
      r.phase = Phase::kReceiving;
      ++receiving_;
      if (hooks_.pulled) hooks_.pulled(r);
      continue;
    }
    const int64_t bytes = r.swapped_tokens * pool_.kv().kv_bytes_per_token();
    swap_used_bytes_ -= bytes;
    it.extra_seconds += static_cast<double>(bytes) / pool_.gpu().pcie_bytes_per_s;
    r.phase = Phase::kRunning;
    r.end_preemption(hooks_.now());
    enter_running(r);
    if (lazy_on_) lazy_.join(r);  // decoding at once
    if (hooks_.observe) hooks_.observe(r, RequestEventKind::kSwappedIn);
  }
}

bool RunQueues::stalled(const RequestState& r, int64_t budget, int64_t extra_free) const {
  const PagedBlocks* paged = pool_.kv().paged();
  if (paged == nullptr) return false;
  const int64_t chunk = std::min(r.prefill_target - r.prefilled, budget);
  return paged->blocks_to_grow(r.spec.id, r.prefilled + chunk) > paged->free_blocks() + extra_free;
}

int64_t RunQueues::full_sequence_blocks(const PrefixHashes& prefix, int64_t target,
                                        const BatchLimits& limits) const {
  const PagedBlocks& paged = *pool_.kv().paged();
  int64_t need = paged.blocks_to_allocate(prefix, target);
  // A sliding window holds at most a window and a chunk: vLLM caps the reservation there
  // (SlidingWindowSpec.max_admission_blocks_per_request).
  if (const int64_t w = pool_.model().sliding_window.value_or(0); w > 0) {
    const int64_t bt = paged.block_tokens();
    const int64_t window_tokens = w - 1 + limits.max_num_batched_tokens;
    need = std::min(need, (window_tokens + bt - 1) / bt + 1);
  }
  return need;
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
  if (waiting_.empty()) return true;
  if (static_cast<int64_t>(running_.size()) >= limits.max_num_seqs) return true;
  const PagedBlocks* paged = pool_.kv().paged();
  if (guarded || !preallocated_ || paged == nullptr) return false;
  // admit_prefills' first allocation for the head, with no prefill planned before it.
  const RequestState& r = requests_.at(waiting_.front());
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

void RunQueues::check() const {
  for (const RequestState* r : running_) {
    const int64_t id = r->spec.id;
    auto f = requests_.find(id);
    KVSIM_CHECK(f != requests_.end() && &f->second == r && r->phase == Phase::kRunning,
                "running request {} is not in flight as running", id);
    KVSIM_CHECK(pool_.kv().holds(id), "running request {} holds no KV", id);
    KVSIM_CHECK(r->kv_tokens == 0 && r->kv_deferred == 0,
                "running request {} has a deferral window open at a check", id);
  }
  for (int64_t id : waiting_) {
    KVSIM_CHECK(!pool_.kv().holds(id), "waiting request {} still holds KV", id);
  }
  int64_t receiving = 0, handing_off = 0;
  for (const auto& [id, r] : requests_) {
    if (r.phase != Phase::kReceiving && r.phase != Phase::kHandingOff) continue;
    (r.phase == Phase::kReceiving ? receiving : handing_off) += 1;
    KVSIM_CHECK(pool_.kv().holds(id), "request {} holds no KV during its transfer", id);
  }
  KVSIM_CHECK(receiving == receiving_ && handing_off == handing_off_,
              "transfers: {} receiving, {} handing off vs counted {}, {}", receiving, handing_off,
              receiving_, handing_off_);
}

}  // namespace kvsim
