// PagedStore's invariants: the totals against the requests' records, and with prefix caching the
// block records against the tables and the free list.
#include "models/memory/paged_store.h"

#include <algorithm>

#include "core/check.h"

namespace kvsim {

namespace {
int64_t paged_check_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

void PagedStore::check_invariants() const {
  if (groups_) return groups_->check_invariants();
  KVSIM_CHECK(deferred_tokens_ == 0, "{} deferred tokens not settled", deferred_tokens_);
  KVSIM_CHECK(crossed_blocks_ == 0 && swapped_blocks_ == 0 && crossed_ids_.empty(),
              "{} crossed blocks not settled", crossed_blocks_);
  int64_t reservation = 0, internal = 0;
  int64_t held = 0, used = 0, live = 0;
  for (const Req& r : slots_) {
    if (r.id < 0) continue;
    const RequestId id = r.id;
    ++held;
    KVSIM_CHECK(
        index_.find(id) != IdIndex::kNone && &slots_[static_cast<size_t>(index_.find(id))] == &r,
        "request {} is not indexed to its slot", id);
    KVSIM_CHECK(r.held >= 0 && r.skipped + r.held == paged_check_ceil_div(r.tokens, block_tokens_),
                "request {} holds {} blocks ({} freed) for {} tokens", id, r.held, r.skipped,
                r.tokens);
    // Freed leading blocks lie wholly before the window of the tokens computed so far.
    KVSIM_CHECK(r.skipped == 0 || (sliding_window_ > 0 &&
                                   r.skipped * block_tokens_ <= r.tokens - sliding_window_),
                "request {} freed {} blocks of {} tokens with a window of {}", id, r.skipped,
                r.tokens, sliding_window_);
    const int64_t cap = span_tokens(r);
    const int64_t res = reservation_tokens(r.tokens, cap, r.max_total);
    reservation += res;
    internal += cap - r.tokens - res;
    KVSIM_CHECK(cap - r.tokens < block_tokens_, "request {} wastes a whole block", id);
    // Without sharing (no prefix caching), its blocks are its own and hold its tokens but the
    // freed ones'.
    used += r.held;
    live += r.tokens - r.skipped * block_tokens_;
  }
  KVSIM_CHECK(
      held == static_cast<int64_t>(index_.size()) &&
          held + static_cast<int64_t>(free_slots_.size()) == static_cast<int64_t>(slots_.size()),
      "{} held slots, {} indexed, {} free of {}", held, index_.size(), free_slots_.size(),
      slots_.size());
  KVSIM_CHECK(reservation == reservation_tokens_ && internal == internal_tokens_,
              "slack {}+{} != tracked {}+{}", reservation, internal, reservation_tokens_,
              internal_tokens_);
  if (prefix_caching_) {
    check_block_records();  // blocks may be shared: count them from their records
    return;
  }
  KVSIM_CHECK(free_blocks() >= 0 && used + free_blocks() == num_blocks_,
              "{} blocks held + {} free != {} blocks (leak)", used, free_blocks(), num_blocks_);
  KVSIM_CHECK(live == live_tokens_, "live tokens {} != tracked {}", live, live_tokens_);
}

void PagedStore::check_block_records() const {
  // Reference counts equal the number of block-table entries; free list = blocks with ref 0.
  std::vector<int32_t> owners(static_cast<size_t>(num_blocks_), 0);
  for (const Req& r : slots_) {
    if (r.id < 0) continue;
    const BlockTable& t = table(r);
    KVSIM_CHECK(static_cast<int64_t>(t.blocks.size()) == r.held,
                "request {} lists {} blocks, holds {}", r.id, t.blocks.size(), r.held);
    KVSIM_CHECK((t.keyed <= t.keys.size() || t.owner >= 0) &&
                    static_cast<int64_t>(t.keyed) <= r.skipped + r.held,
                "request {} keyed {} of {} keys, {} blocks", r.id, t.keyed, t.keys.size(), r.held);
    for (int32_t b : t.blocks) ++owners[static_cast<size_t>(b)];
  }
  pool_.check_invariants();  // the free list is the blocks without holders
  int64_t live = 0, used = 0;
  for (int64_t b = 0; b < num_blocks_; ++b) {
    const auto i = static_cast<size_t>(b);
    const BlockPool::Block& k = blk(static_cast<int32_t>(b));
    KVSIM_CHECK(k.ref == owners[i], "block {} has ref {} but {} owners", b, k.ref, owners[i]);
    if (k.ref > 0) {
      ++used;
      live += k.filled;
      KVSIM_CHECK(k.ref == 1 || k.filled == block_tokens_, "shared block {} is not full", b);
    } else {
      KVSIM_CHECK(k.filled == 0, "free block {} still holds {} tokens", b, k.filled);
    }
  }
  KVSIM_CHECK(used + free_blocks() == num_blocks_, "{} used + {} free != {} blocks (leak)", used,
              free_blocks(), num_blocks_);
  KVSIM_CHECK(live == live_tokens_, "live tokens {} != tracked {}", live, live_tokens_);
  KVSIM_CHECK(live + reservation_tokens_ + internal_tokens_ == used * block_tokens_,
              "live {} + slack {} != {} held tokens", live, reservation_tokens_ + internal_tokens_,
              used * block_tokens_);
}

}  // namespace kvsim
