#include "sim/serving/fast_forward/lazy_decodes.h"

#include <algorithm>
#include <functional>

#include "core/check.h"

namespace kvsim {

void LazyDecodes::push_due_at(int64_t step, const RequestState& r) {
  KVSIM_CHECK(step - step_ >= 1, "request {} due at step {}, now {}", r.spec.id, step, step_);
  due_.push_back({step, r.run_seq, r.lazy_slot, slots_[static_cast<size_t>(r.lazy_slot)].due_tag});
  std::push_heap(due_.begin(), due_.end(), std::greater<>());
}

int64_t LazyDecodes::steps_before_due(int64_t max) const {
  // Every entry is for a step after step(): take_due pops a step's entries at its plan, and a
  // quiet run never passes one.
  return due_.empty() ? max : std::min(max, due_.front().step - (step_ + 1));
}

void LazyDecodes::crossed_in_period(std::vector<int64_t>& crossed,
                                    std::vector<int64_t>& swapped) const {
  const size_t p = bt_ > 0 ? classes_.size() : 1;
  crossed.resize(p);
  swapped.resize(p);
  if (bt_ == 0) {
    crossed[0] = swapped[0] = 0;
    return;
  }
  // From the classes crossing at step() + 1 (next_class_) round the ring.
  int64_t x = 0, w = 0;
  for (size_t i = 0, at = next_class_; i < p; ++i) {
    x += static_cast<int64_t>(classes_[at].size());
    w += static_cast<int64_t>(swap_classes_[at].size());
    crossed[i] = x;
    swapped[i] = w;
    if (++at == p) at = 0;
  }
}

void LazyDecodes::advance(int64_t k) {
  // The caller looked ahead (steps_before_due: none due); a completion would be a member event.
  KVSIM_CHECK(k >= 0 && walk_pos_ == kNoWalk && planned_ == 0 && joining_.empty(),
              "quiet steps with a plan in progress or members joining");
  KVSIM_CHECK(k == 0 || next_done() > step_ + k, "quiet steps over a completion");
  KVSIM_CHECK(k == 0 || next_cap() >= step_ + k, "quiet steps past a member reaching the window");
  step_ += k;
  step_moved();
  if (!caps_.empty()) reach_caps();
}

void LazyDecodes::set_block_tokens(int64_t bt) {
  KVSIM_CHECK(n_ == 0, "block crossings switched with members");
  bt_ = bt;
  classes_.assign(static_cast<size_t>(std::max<int64_t>(bt, 0)), {});
  swap_classes_.assign(static_cast<size_t>(std::max<int64_t>(bt, 0)), {});
  step_moved();
}

void LazyDecodes::join_class(RequestState& r) {
  // Its plan target at step s is kv_tokens + (s - lazy_sync); a new block starts at targets
  // 1 modulo bt.
  const int64_t rho = ((1 - r.kv_tokens + r.lazy_sync) % bt_ + bt_) % bt_;
  Slot& slot = slots_[static_cast<size_t>(r.lazy_slot)];
  slot.class_swaps = r.kv_swaps;
  std::vector<int32_t>& c = (r.kv_swaps ? swap_classes_ : classes_)[static_cast<size_t>(rho)];
  slot.class_id = static_cast<int32_t>(rho);
  slot.class_pos = static_cast<int32_t>(c.size());
  c.push_back(r.lazy_slot);
}

void LazyDecodes::leave_class(int32_t slot_index) {
  // All in the slot table: neither this member's RequestState nor that of the one moved into
  // its place is touched (both likely out of cache).
  Slot& slot = slots_[static_cast<size_t>(slot_index)];
  if (slot.class_id < 0) return;
  std::vector<int32_t>& c =
      (slot.class_swaps ? swap_classes_ : classes_)[static_cast<size_t>(slot.class_id)];
  const auto pos = static_cast<size_t>(slot.class_pos);
  c[pos] = c.back();
  slots_[static_cast<size_t>(c[pos])].class_pos = static_cast<int32_t>(pos);
  c.pop_back();
  slot.class_id = -1;
  slot.class_pos = -1;
}

void LazyDecodes::push_due(RequestState& r) {
  // A window holding exactly the tokens up to the last step's target defers one token a step
  // for kv_room steps; any other state goes through the ledger at the next step.
  const bool steady = r.kv_tokens > 0 && r.kv_tokens == r.context_tokens() - 1;
  // Its earlier entry, if any (a long window's last crossing), is void.
  ++slots_[static_cast<size_t>(r.lazy_slot)].due_tag;
  if (!steady) {
    push_due_at(r.lazy_sync + 1, r);
    return;
  }
  if (!r.kv_long) {
    push_due_at(r.lazy_sync + r.kv_room + 1, r);
    return;
  }
  // A long window: its crossings into full blocks are counted by class; the crossing into the
  // request's last, partial block (target floor(M / bt) * bt + 1, if it comes before M) is due.
  join_class(r);
  const int64_t end = r.kv_tokens + r.kv_room;
  const int64_t max_total = r.max_total_tokens();
  if (end >= max_total) {  // to its max_total (the store's may be larger)
    const int64_t last = end / bt_ * bt_ + 1;
    if (last <= end - 1 && last > r.kv_tokens) push_due_at(r.lazy_sync + (last - r.kv_tokens), r);
    return;
  }
  // A window that ends before the request's last target, before a growth that frees blocks (a
  // sliding window's at a block's end, PagedStore::open_long; a hybrid model's local group's
  // anywhere, HybridKvCoordinator::open_long): that growth is due, or before it the crossing into
  // the request's last, partial block if the window reaches it.
  const int64_t last = max_total / bt_ * bt_ + 1;
  if (max_total % bt_ != 0 && last <= end && last > r.kv_tokens) {
    push_due_at(r.lazy_sync + (last - r.kv_tokens), r);
  } else if (end + 1 <= max_total - 1) {
    push_due_at(r.lazy_sync + (end + 1 - r.kv_tokens), r);
  }
}

void LazyDecodes::take_crossers(std::vector<RequestState*>& due) {
  for (auto* classes : {&classes_, &swap_classes_}) {
    std::vector<int32_t>& c = (*classes)[next_class_];
    while (!c.empty()) {
      const int32_t slot = c.back();
      leave_class(slot);
      due.push_back(slots_[static_cast<size_t>(slot)].r);
    }
  }
  std::sort(due.begin(), due.end(),
            [](const RequestState* a, const RequestState* b) { return a->run_seq < b->run_seq; });
}

void LazyDecodes::add(RequestState& r) {
  KVSIM_CHECK(!member(r) && r.phase == Phase::kRunning && r.decoding(),
              "request {} joins the decode aggregate while not decoding", r.spec.id);
  KVSIM_CHECK(r.generated < r.spec.output_tokens, "request {} joins with nothing left to decode",
              r.spec.id);
  r.lazy_sync = step_;
  r.lazy_planned = false;
  if (free_slots_.empty()) {
    free_slots_.push_back(static_cast<int32_t>(slots_.size()));
    slots_.emplace_back();
  }
  r.lazy_slot = free_slots_.back();
  free_slots_.pop_back();
  Slot& slot = slots_[static_cast<size_t>(r.lazy_slot)];
  slot.r = &r;
  slot.run_seq = r.run_seq;  // (due_tag goes on counting: see Slot)
  ++n_;
  const int64_t term = r.prompt_tokens + r.generated - step_;
  ctx_ += term;
  done_.push_back({step_ + r.spec.output_tokens - r.generated, r.run_seq, r.lazy_slot});
  std::push_heap(done_.begin(), done_.end(), std::greater<>());
  if (window_ > 0 && term + step_ < window_) {
    ++growing_;
    growing_ctx_ += term;
    caps_.push_back({window_ - term, r.run_seq, r.lazy_slot});
    std::push_heap(caps_.begin(), caps_.end(), std::greater<>());
  }
  push_due(r);
}

void LazyDecodes::join(RequestState& r) {
  if (walk_pos_ == kNoWalk) {
    add(r);
  } else {
    joining_.push_back(&r);
  }
}

void LazyDecodes::leave(RequestState& r, KvLedger& ledger) {
  if (!member(r)) {
    if (!joining_.empty()) std::erase(joining_, &r);
    return;
  }
  const int64_t term = r.prompt_tokens + r.generated - r.lazy_sync;
  const int64_t behind = step_ - r.lazy_sync;
  if (behind > 0) {
    r.generated += behind;
    KvLedger::catch_up(r, behind);
  }
  if (r.lazy_planned) {
    --planned_;
  } else if (walk_pos_ == kWalkDone) {
    KvLedger::catch_up(r, 1);  // the plan's token, already in end_walk's sum
  } else if (walk_pos_ != kNoWalk && r.run_seq < walk_pos_) {
    // The walk has passed it: stepping deferred its token there.
    const bool deferred = ledger.defer(r, r.context_tokens());
    KVSIM_CHECK(deferred, "request {}: a passed member's token does not fit its window", r.spec.id);
  }
  --n_;
  ctx_ -= term;
  if (window_ > 0 && term + step_ < window_) {
    --growing_;
    growing_ctx_ -= term;
  }
  leave_class(r.lazy_slot);
  Slot& slot = slots_[static_cast<size_t>(r.lazy_slot)];
  slot.r = nullptr;
  slot.run_seq = -1;
  free_slots_.push_back(r.lazy_slot);
  r.lazy_slot = -1;
  r.lazy_sync = -1;
  r.lazy_planned = false;
}

void LazyDecodes::take_due(std::vector<RequestState*>& out) {
  out.clear();
  const int64_t target = step_ + 1;
  // The heap pops a step's entries in running order (entries order by step, then run_seq).
  pop_through(due_, target, [&](const Entry& e) {
    RequestState* r = live_due(e);
    if (r == nullptr) return;
    KVSIM_CHECK(e.step == target, "request {} was due at step {}, now is {}", r->spec.id, e.step,
                target);
    leave_class(e.slot);  // a long window's last crossing: explicit
    out.push_back(r);
  });
}

void LazyDecodes::restore_due(const std::vector<RequestState*>& due) {
  for (RequestState* r : due) {
    push_due_at(step_ + 1, *r);
    // take_due took a long window's last crossing out of its class: back in.
    if (r->kv_long && slots_[static_cast<size_t>(r->lazy_slot)].class_id < 0 &&
        r->kv_tokens == r->context_tokens() - 1) {
      join_class(*r);
    }
  }
}

void LazyDecodes::walk_at(RequestState& r) {
  const int64_t behind = step_ - r.lazy_sync;
  if (behind > 0) {
    r.generated += behind;
    KvLedger::catch_up(r, behind);
    r.lazy_sync = step_;
  }
  walk_pos_ = r.run_seq;
}

void LazyDecodes::end_walk(KvLedger& ledger, int64_t crossers, int64_t swappers) {
  ledger.add_crossings(crossers);
  ledger.add_swaps(swappers);
  ledger.defer_many(n_ - planned_ - crossers - swappers);
  walk_pos_ = kWalkDone;
}

void LazyDecodes::commit(const std::vector<RequestState*>& grown) {
  KVSIM_CHECK(walk_pos_ == kWalkDone, "a step commits without its plan's walk");
  ++step_;
  if (bt_ > 0 && ++next_class_ == static_cast<size_t>(bt_)) next_class_ = 0;
  if (!caps_.empty()) reach_caps();
  for (RequestState* r : grown) {
    if (!member(*r) || !r->lazy_planned) continue;
    ++r->generated;  // end_iteration's increment
    r->lazy_sync = step_;
    r->lazy_planned = false;
    push_due(*r);
  }
  planned_ = 0;
  walk_pos_ = kNoWalk;
  for (RequestState* r : joining_) {
    if (r->phase == Phase::kRunning && r->decoding() && !member(*r)) add(*r);
  }
  joining_.clear();
}

void LazyDecodes::take_done(std::vector<int64_t>& out) {
  pop_through(done_, step_, [&](const Entry& e) {
    const RequestState* r = live(e);
    if (r == nullptr) return;
    KVSIM_CHECK(e.step == step_, "request {} completed at step {}, now is {}", r->spec.id, e.step,
                step_);
    out.push_back(r->spec.id);
  });
}

void LazyDecodes::set_window(int64_t window) {
  KVSIM_CHECK(n_ == 0 && window >= 0, "decode aggregate: a window of {} set with {} members",
              window, n_);
  window_ = window;
}

void LazyDecodes::reach_caps() {
  pop_through(caps_, step_, [&](const Entry& e) {
    const RequestState* r = live(e);
    if (r == nullptr) return;
    const int64_t term = r->prompt_tokens + r->generated - r->lazy_sync;
    KVSIM_CHECK(e.step == step_ && window_ - term == e.step,
                "request {} reaches the window at step {}, now is {}", r->spec.id, e.step, step_);
    --growing_;
    growing_ctx_ -= term;
  });
}

int64_t LazyDecodes::first_live_step(std::vector<Entry>& heap) const {
  while (!heap.empty() && live(heap.front()) == nullptr) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    heap.pop_back();
  }
  return heap.empty() ? std::numeric_limits<int64_t>::max() : heap.front().step;
}

void LazyDecodes::flush(const std::vector<RequestState*>& running, KvLedger& ledger) {
  for (RequestState* r : running) leave(*r, ledger);
  KVSIM_CHECK(n_ == 0 && planned_ == 0, "decode aggregate: {} members left after a flush", n_);
  ctx_ = 0;
  due_.clear();
  done_.clear();
  caps_.clear();
  KVSIM_CHECK(growing_ == 0 && growing_ctx_ == 0, "decode aggregate: {} growing members left",
              growing_);
  joining_.clear();
  walk_pos_ = kNoWalk;
  for (RequestState* r : running) {
    // (Async scheduling: one with all its tokens is running until the next plan, not decoding.)
    if (r->decoding() && r->generated < r->spec.output_tokens) add(*r);
  }
}

}  // namespace kvsim
