// LazyDecodes: the running batch's decoding requests kept in aggregate, so that an iteration
// costs work for the requests that have an event in it, not for every request in the batch
// (engine.fast_forward; docs/architecture.md, "Fast-forward").
//
// Under the continuous scheduler every decoding request grows by one token in every iteration.
// Stepping walks them all each time (RunQueues::grow_each_decode's walk, StepDecodes::commit's
// increments). Here a member's RequestState is left as it was at the end of step `lazy_sync`; the
// replica counts committed steps (step()), and a member's true figures are its stored ones advanced
// by step() - lazy_sync tokens: that many more generated, and as many more deferred KV tokens in
// its open window (KvLedger::catch_up). A member is touched only at its own events:
//   - its window runs out (a block boundary, or no window yet): the "due" heap, keyed by the
//     step whose plan must grow it through the ledger, exactly as the walk would;
//   - it completes: the "done" heap, keyed by the step at whose end it makes its last token;
//   - it leaves the batch (preempted, finished): leave() writes its figures out first.
// Decode count and context sum come from two integers (size(), context_sum()), so a plan needs
// no walk. Everything the walk would do to a member is done, with the same arguments in the same
// order among the members that need the store, and the tokens of the others go to the ledger in
// one sum at the end of the plan (the store's totals are sums: its figures after the plan's
// report() are the same).
//
// Block crossings in aggregate (a store with DeferredGrowth::crossings_in_aggregate()): a member
// grown through the ledger opens a long window (to its max_total). Its plan targets then cross
// into a new block every block_tokens steps, at the steps of one residue class modulo the block
// size; a class's size is the number of blocks the step takes (add_crossings), with no call per
// member. Only the crossing into its last, partial block (whose slack is not a whole block's) is
// due, as are all of a step's crossers when they might not all find a free block: then the
// step's walk is explicit, in running order, so any preemption falls where stepping's does.
// With a sliding window, a member past it by a block frees its oldest block at each crossing: its
// crossings are counted in swapping classes (add_swaps: a block taken and one freed); any other
// long window ends before its first crossing that frees blocks, which is then due
// (PagedStore::open_long). The decode context is then the attended tokens (attended_sum()).
//
// The plan of step G+1 (G = step()) is "in progress" from begin_walk() until commit(); which
// members the walk would already have passed matters when one leaves during it (a preemption, an
// OOM that ends the plan): see leave(). A plan that never commits (an OOM ended it) is undone
// into explicit figures at the next plan (needs_flush(), flush()).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "sim/request/request_state.h"
#include "sim/serving/kv_ledger.h"

namespace kvsim {

class LazyDecodes {
 public:
  LazyDecodes() = default;

  int64_t step() const { return step_; }  // steps committed
  int64_t size() const { return n_; }     // members
  // The members' context sum at the plan of step step() + 1 (every one's prompt + generated).
  int64_t context_sum() const { return ctx_ + n_ * step_; }
  // Sliding-window attention (ModelSpec::attended_tokens): a decode query attends to
  // min(context, window) tokens; 0: all of them (the default).
  void set_window(int64_t window);
  // The members' attended tokens at the plan of step step() + 1 (the decode context the latency
  // and activation models take), and how many more each step's plan attends to until a member's
  // context reaches the window (next_cap(): the first step at whose plan one has; max when none).
  int64_t attended_sum() const {
    return window_ == 0 ? context_sum()
                        : growing_ctx_ + growing_ * step_ + (n_ - growing_) * window_;
  }
  int64_t attended_growth() const { return window_ == 0 ? n_ : growing_; }
  int64_t next_cap() { return first_live_step(caps_); }
  static bool member(const RequestState& r) { return r.lazy_sync >= 0; }

  // `r` runs and decodes, its figures as of now: it joins now, or at the next commit when a plan
  // is in progress (it takes no part in that plan's step).
  void join(RequestState& r);
  // Writes `r`'s figures out, as the walk would have left them now, and takes it out. A no-op
  // for a non-member.
  void leave(RequestState& r, KvLedger& ledger);
  // How far `r`'s stored figures lag what leave() would write out now (zero for a non-member):
  // its true figures, read without touching it (RequestState::generated_at, kv_tokens_held).
  AggregateLag lag(const RequestState& r) const {
    if (!member(r)) return {};
    const int64_t behind = step_ - r.lazy_sync;
    // The plan in progress's token, as leave() counts it: in end_walk's sum, or deferred by a
    // walk that passed it (a member grown in the plan holds it in its figures already).
    const bool passed = walk_pos_ == kWalkDone || (walk_pos_ != kNoWalk && r.run_seq < walk_pos_);
    const bool planned_token = !r.lazy_planned && passed;
    return {.generated = behind, .kv_tokens = behind + (planned_token ? 1 : 0)};
  }

  // The plan of step step() + 1: the members due in it, in run order (popped), then the walk
  // over them (walk_at() before each one's growth; skip those no longer members), then end_walk
  // with the ledger (the other members' tokens, one sum).
  void take_due(std::vector<RequestState*>& out);
  // Puts back what take_due() returned (a fast-forward step that will not run after all).
  void restore_due(const std::vector<RequestState*>& due);
  void begin_walk() { walk_pos_ = std::numeric_limits<int64_t>::min(); }
  // Block crossings in aggregate: the block size (0: off, the default).
  void set_block_tokens(int64_t bt);
  bool long_windows() const { return bt_ > 0; }
  // The members whose targets cross into a new (full) block at step step() + 1, counted in
  // aggregate (none are in a due list): those that take a block (crossers()), and those whose
  // crossing also frees one (swappers(): a sliding window's steady state, kv_swaps), which
  // need no free block.
  int64_t crossers() const { return class_size(classes_); }
  int64_t swappers() const { return class_size(swap_classes_); }
  // Moves both kinds into `due` (for an explicit walk), keeping it in running order.
  void take_crossers(std::vector<RequestState*>& due);
  // Looking ahead from step() + 1, for a run of quiet steps (no division per step):
  //   - how many steps come before the first at which some member may be due (an entry of a
  //     member that has left counts until its step passes), counting at most `max`;
  //   - the crossers and swappers counted in aggregate at steps step() + 1, step() + 2, ...,
  //     over one block size's period (one step without crossings in aggregate), as crossers()
  //     and swappers() will count them then if no member joins or leaves a class before:
  //     cumulative, so entry i is those of the first i + 1 steps (DecodeRun's period).
  int64_t steps_before_due(int64_t max) const;
  void crossed_in_period(std::vector<int64_t>& crossed, std::vector<int64_t>& swapped) const;
  // `k` quiet steps at once: steps at which no member is due, none completes and none joins,
  // whose plans would each be take_due (empty), begin_walk, end_walk and commit. The caller
  // gives the ledger what their end_walks would (the crossings and the other tokens, summed).
  void advance(int64_t k);
  // Brings a due member up to step(); the walk is at it now.
  void walk_at(RequestState& r);
  // A due member was grown for the step (it is now a member whose figures include it).
  void grown(RequestState& r) {
    r.lazy_planned = true;
    ++planned_;
  }
  // `crossers`, `swappers`: the step's counted in aggregate (crossers() and swappers() when not
  // taken).
  void end_walk(KvLedger& ledger, int64_t crossers, int64_t swappers);
  // The step ran: counts it, and gives the grown members their token. `grown`: those members
  // (the plan's explicit decodes; others are skipped).
  void commit(const std::vector<RequestState*>& grown);
  // The members that completed at the end of step(), in run order (still members: the caller
  // finishes them, which makes them leave).
  void take_done(std::vector<int64_t>& out);
  // The first step at whose end a member completes (max when none).
  int64_t next_done() { return first_live_step(done_); }
  // Whether the plan in progress has walked (end_walk() ran): a plan may leave the decodes out.
  bool walked() const { return walk_pos_ == kWalkDone; }
  // Whether the last plan never committed (an OOM ended it): flush() before the next.
  bool needs_flush() const { return walk_pos_ != kNoWalk; }
  // Writes every member's figures out and joins the decoding ones of `running` (run order)
  // again, from their explicit figures.
  void flush(const std::vector<RequestState*>& running, KvLedger& ledger);

 private:
  // An event of the member in slot `slot` while it holds run_seq (a member that left, or left and
  // came back, no longer matches: entries are dropped when met, not searched for).
  struct Entry {
    int64_t step;
    int64_t run_seq;
    int32_t slot;
    int32_t tag = 0;  // due entries: the slot's due_tag when pushed
    bool operator>(const Entry& o) const {
      return step != o.step ? step > o.step : run_seq > o.run_seq;
    }
  };
  struct Slot {
    RequestState* r = nullptr;  // nullptr: free
    int64_t run_seq = -1;
    // Its crossing class (long window; -1: none), whether that is a swapping one (kv_swaps when
    // it joined), and its place in it.
    int32_t class_id = -1;
    bool class_swaps = false;
    int32_t class_pos = -1;
    // Its latest due entry's tag: a newer entry supersedes older ones. Never reset, so that the
    // entries of an earlier member of the slot (even the same request, same run_seq, after a
    // flush) stay void. Kept here, not in the RequestState, so that a void entry costs no miss.
    int32_t due_tag = 0;
  };
  static constexpr int64_t kNoWalk = -1;  // walk_pos_: no plan in progress
  static constexpr int64_t kWalkDone = std::numeric_limits<int64_t>::max();
  // The member an entry names, or nullptr when it left (or left and came back: new run_seq).
  RequestState* live(const Entry& e) const {
    const Slot& s = slots_[static_cast<size_t>(e.slot)];
    return s.run_seq == e.run_seq ? s.r : nullptr;
  }
  // A due entry also names the member's latest due (it may have been grown since).
  RequestState* live_due(const Entry& e) const {
    const Slot& s = slots_[static_cast<size_t>(e.slot)];
    return s.run_seq == e.run_seq && s.due_tag == e.tag ? s.r : nullptr;
  }
  void push_due(RequestState& r);
  void push_due_at(int64_t step, const RequestState& r);
  void add(RequestState& r);  // joins with lazy_sync = step_
  void join_class(RequestState& r);
  void leave_class(int32_t slot);  // out of its crossing class, if in one

  std::vector<Slot> slots_;
  std::vector<int32_t> free_slots_;
  int64_t step_ = 0;
  int64_t n_ = 0;
  int64_t ctx_ = 0;  // sum over members of prompt + generated - lazy_sync
  // kNoWalk; during a walk the run_seq it is at (members before it in run order were passed);
  // kWalkDone from end_walk() to commit().
  int64_t walk_pos_ = kNoWalk;
  int64_t planned_ = 0;  // members grown in the plan in progress
  // Due members: a min-heap by step, then running order (about one live entry per member: a
  // few dozen, in cache, where a ring of buckets by step touched a cold bucket per push).
  std::vector<Entry> due_;
  std::vector<Entry> done_;  // min-heap
  // With a window: the members whose context is below it (a member's context at the plan of
  // step step() + 1 is its ctx_ term + step()), their count and terms' sum, and a min-heap of
  // the steps at which each reaches it (reach_caps() moves them out when step() gets there).
  int64_t window_ = 0;
  int64_t growing_ = 0, growing_ctx_ = 0;
  std::vector<Entry> caps_;
  void reach_caps();
  // The step of a min-heap's first entry of a member still there (dropping those of members that
  // left); max when none.
  int64_t first_live_step(std::vector<Entry>& heap) const;
  // Pops a min-heap's entries of steps up to `step`, in (step, run_seq) order, handing each to
  // `f` (which tells a live entry from a void one).
  template <typename F>
  static void pop_through(std::vector<Entry>& heap, int64_t step, F f) {
    while (!heap.empty() && heap.front().step <= step) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<>());
      const Entry e = heap.back();
      heap.pop_back();
      f(e);
    }
  }
  int64_t bt_ = 0;
  std::vector<std::vector<int32_t>> classes_;       // slots by crossing residue, bt_ of them
  std::vector<std::vector<int32_t>> swap_classes_;  // the same for swapping windows
  size_t next_class_ = 0;  // (step_ + 1) modulo bt_: the classes crossing at the next step
  void step_moved() { next_class_ = bt_ > 0 ? static_cast<size_t>((step_ + 1) % bt_) : 0; }
  int64_t class_size(const std::vector<std::vector<int32_t>>& c) const {
    return bt_ > 0 ? static_cast<int64_t>(c[next_class_].size()) : 0;
  }
  std::vector<RequestState*> joining_;  // join at the next commit (running and decoding then)
};

}  // namespace kvsim
