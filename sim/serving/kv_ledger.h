// KvLedger: the engine's side of a request's KV once it holds some. Every call that grows,
// settles or releases a request's KV goes through it, so the deferred-growth ordering rule
// (DeferredGrowth in kv_capabilities.h: a request's deferral window is settled, after the store
// has been told the deferred sum, before any other call about it) holds by construction rather
// than by each call site's care; the store KVSIM_CHECKs it. The two calls that give a request its
// first KV (admitting a waiting request, swapping a preempted one back in) are RunQueues' own, on
// the pool: a fresh allocation has no window, so the rule holds for them as well.
//
// The decode fast path: a decoding request whose next token stays inside its open window costs
// no store call; the ledger counts it in RequestState (kv_tokens, kv_room, kv_deferred) and in
// one sum reported to the store once per plan. The engine's view of a window is open exactly
// while kv_tokens > 0, as the store's. Stores without deferred growth never open a window, so
// every token takes the slow path (grow_to_at_least).
#pragma once

#include <cstdint>

#include "models/memory/gpu_memory_pool.h"
#include "models/memory/kv_capabilities.h"
#include "sim/request/request_state.h"
#include "sim/serving/iteration_clock.h"

namespace kvsim {

class KvLedger {
 public:
  // The pool is borrowed; it must outlive the ledger.
  explicit KvLedger(GpuMemoryPool& pool) : pool_(pool), deferral_(pool.kv().deferred_growth()) {}

  // The decode fast path: when `r` can reach `target` tokens inside its open window, records the
  // growth (no store call) and returns true. Requires: r running and decoding.
  bool defer(RequestState& r, int64_t target) {
    if (target > r.kv_tokens && target - r.kv_tokens > r.kv_room) return false;
    if (target > r.kv_tokens) {
      const int64_t d = target - r.kv_tokens;
      r.kv_tokens = target;
      r.kv_room -= d;
      r.kv_deferred += d;
      unreported_ += d;
    }
    return true;
  }
  // The fast-forward's aggregate form of defer(): `tokens` one-token steps of requests whose
  // windows have room, counted here without touching their RequestState; each such request
  // catches up later with catch_up() before anything else reads its window.
  void defer_many(int64_t tokens) { unreported_ += tokens; }
  // Applies `steps` one-token deferrals that defer_many() already counted to r's window.
  // Requires: r's window has that much room.
  static void catch_up(RequestState& r, int64_t steps) {
    r.kv_tokens += steps;
    r.kv_room -= steps;
    r.kv_deferred += steps;
  }
  // The slow path, after settle(r): grows r's KV to `target` and, with deferred growth, opens its
  // next window.
  // `long_window`: open a window across blocks (the decode aggregate; requires
  // crossings_in_aggregate()).
  AllocResult grow_decode(RequestState& r, int64_t target, bool long_window = false);
  bool crossings_in_aggregate() const {
    return deferral_ != nullptr && deferral_->crossings_in_aggregate();
  }
  // `n` long-window tokens that each start a new block: to the store at once (their windows
  // catch up with catch_up() as for defer_many()).
  void add_crossings(int64_t n) {
    report();
    if (n > 0) deferral_->add_crossings(n);
  }
  // `n` such tokens of windows whose crossings also free a block each (RequestState::kv_swaps).
  void add_swaps(int64_t n) {
    report();
    if (n > 0) deferral_->add_swaps(n);
  }
  int64_t block_tokens() const {
    const PagedBlocks* paged = pool_.kv().paged();
    return paged != nullptr ? paged->block_tokens() : 0;
  }
  // Grows `r` to `tokens` unless it already holds that many (a prefill chunk; a plan cut short
  // by an aborted request may already have grown it: growth is idempotent per target).
  AllocResult ensure(const RequestState& r, int64_t tokens) {
    return pool_.ensure_kv(r.spec.id, tokens);
  }

  // Reports the tokens deferred so far to the store (its totals then count them).
  void report();
  // Reports, then closes r's window (if open), handing its deferred tokens to the store. Before
  // any other store call about r.
  void settle(RequestState& r);
  // Forgets the engine's view of r's KV (no window open): a new allocation (admission, swap-in).
  static void forget(RequestState& r) {
    r.kv_tokens = r.kv_room = 0;
    r.kv_long = false;
    r.kv_swaps = false;
  }
  // Settles and frees r's KV; returns the tokens it held. Requires: r holds KV.
  int64_t release(RequestState& r);
  // The same when r holds KV; forgets the view either way.
  void release_if_held(RequestState& r);
  // A replica's iteration clock (borrowed; nullptr for none): told of every KV release here, so
  // a clock that keeps real KV drops it exactly when the engine does.
  void set_clock(IterationClock* clock) { clock_ = clock; }

 private:
  void free_kv(const RequestState& r) {
    pool_.release_kv(r.spec.id);
    if (clock_ != nullptr) clock_->release(r.spec.id);
  }

  GpuMemoryPool& pool_;
  IterationClock* clock_ = nullptr;
  DeferredGrowth* deferral_;  // nullptr: the store takes no deferred growth
  int64_t unreported_ = 0;    // deferred tokens not yet passed to DeferredGrowth::add()
};

}  // namespace kvsim
