// PagedStore's deferred growth (DeferredGrowth, models/memory/kv_capabilities.h): the windows a
// fast-forward opens, the crossings and swaps it adds in aggregate, and their settling.
#include "models/memory/paged_store.h"

#include <algorithm>

#include "core/check.h"

namespace kvsim {

namespace {
int64_t paged_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

int64_t PagedStore::tokens(RequestId request) const {
  if (groups_) [[unlikely]]
    return groups_->tokens(request);
  return held(request, "tokens").tokens;
}

int64_t PagedStore::tokens_until_growth_allocates(RequestId request) const {
  if (groups_) return groups_->tokens_until_growth_allocates(request);
  const Req& r = held(request, "tokens_until_growth_allocates");
  return span_tokens(r) - r.tokens;
}

int64_t PagedStore::open(RequestId request) {
  if (groups_) return groups_->open(request);
  Req& r = held(request, "open");
  const int64_t cap = span_tokens(r);
  r.window = reservation_tokens(r.tokens, cap, r.max_total);
  return r.window;
}

bool PagedStore::crossings_swap(const Req& r) const {
  if (sliding_window_ == 0 || prefix_caching_) return false;
  // Its first crossing's target (a new block's first token) is after r.tokens; a growth to T
  // frees blocks_to_skip(r, T - 1), which grows by one each block later.
  const int64_t first = paged_ceil_div(r.tokens, block_tokens_) * block_tokens_ + 1;
  return blocks_to_skip(r, first - 1) == 1;
}

bool PagedStore::long_window_swaps(RequestId request) const {
  if (sliding_window_ == 0) return false;
  const Req* r = find(request);
  KVSIM_CHECK(r != nullptr && r->window >= 0, "long_window_swaps: request {} has no open window",
              request);
  return crossings_swap(*r);
}

int64_t PagedStore::open_long(RequestId request) {
  if (groups_) return groups_->open_long(request);
  KVSIM_CHECK(crossings_in_aggregate(), "open_long: blocks are not counted in aggregate here");
  Req& r = held(request, "open_long");
  int64_t end = r.max_total;
  if (sliding_window_ > 0 && !crossings_swap(r)) {
    // Growth to a target T with r.tokens = T - 1 frees floor((T - window) / block) - skipped
    // leading blocks (blocks_to_skip): some once T >= window + block (skipped + 1). The window
    // stops before the first crossing (T = 1 modulo the block, a new block's first token) that
    // does: that growth goes through grow_req, which frees them, as stepping's does.
    const int64_t frees_from = sliding_window_ + block_tokens_ * (r.skipped + 1);
    const int64_t first = std::max(frees_from, r.tokens + 1);
    end = std::min(end, paged_ceil_div(first - 1, block_tokens_) * block_tokens_);
  }
  r.window = end - r.tokens;
  return r.window;
}

void PagedStore::add_crossings(int64_t n) {
  // Each is grow_req's step for one token that needs one new block whose end is within its
  // request's max_total: the block leaves the free list, the token is live, and the rest of the
  // block is reservation (its last block was full: no slack before).
  if (groups_) return groups_->add_crossings(n);
  KVSIM_CHECK(n >= 0 && n <= free_blocks(), "{} block crossings with {} blocks free", n,
              free_blocks());
  if (prefix_caching_) {
    // With block ids: the blocks leave the free list now, as many as stepping's growth takes at
    // this step and from the same end (each evicts the prefix it still carried), and each
    // request takes its own at settle(). Which request holds which may differ from stepping's:
    // a relabelling of blocks that carry no prefix, which no figure tells apart.
    for (int64_t i = 0; i < n; ++i) crossed_ids_.push_back(pop_free());  // one holder, empty
  }
  crossed_blocks_ += n;
  deferred_tokens_ += n;
  grow_totals(n, n);
}

void PagedStore::add_swaps(int64_t n) {
  // Each is grow_req's step for a token that starts a new block and frees the request's oldest
  // (full) one: add_crossings' block, and one back on the free list with its tokens.
  KVSIM_CHECK(n >= 0 && !prefix_caching_, "{} block swaps (prefix caching: {})", n,
              prefix_caching_);
  crossed_blocks_ += n;
  swapped_blocks_ += n;
  deferred_tokens_ += n;
  window_freed_ += n;
  grow_totals(n, n, n);
}

void PagedStore::grow_totals(int64_t tokens, int64_t crossings, int64_t swaps) {
  GrowthTotals g{free_blocks(), live_tokens_, reservation_tokens_};
  grow_totals(g, tokens, crossings, swaps, block_tokens_);
  // With block ids the crossed blocks left the pool themselves (add_crossings).
  if (!prefix_caching_) pool_.count_out(free_blocks() - g.free_count);
  live_tokens_ = g.live_tokens;
  reservation_tokens_ = g.reservation_tokens;
}

std::optional<KvUsage> PagedStore::usage_after(int64_t tokens, int64_t crossings,
                                               int64_t swaps) const {
  if (groups_) return groups_->usage_after(tokens, crossings, swaps);
  GrowthTotals g{free_blocks(), live_tokens_, reservation_tokens_};
  grow_totals(g, tokens, crossings + swaps, swaps, block_tokens_);
  return usage_of(g);
}

void PagedStore::add(int64_t tokens) {
  if (groups_) return groups_->add(tokens);
  // Each deferred token is one of some request's reservation tokens becoming live (see room()):
  // the same change grow_req would make, summed.
  KVSIM_CHECK(tokens >= 0 && tokens <= reservation_tokens_, "deferring {} tokens with {} reserved",
              tokens, reservation_tokens_);
  deferred_tokens_ += tokens;
  grow_totals(tokens, 0);
}

void PagedStore::settle(RequestId request, int64_t tokens) {
  if (groups_) return groups_->settle(request, tokens);
  Req* r = find(request);
  KVSIM_CHECK(r != nullptr, "request {} holds no KV", request);
  KVSIM_CHECK(r->window >= 0, "request {}: settling a deferral window that is not open", request);
  KVSIM_CHECK(tokens >= 0 && tokens <= deferred_tokens_ && tokens <= r->window,
              "request {}: settling {} deferred tokens ({} outstanding) in a window of {}", request,
              tokens, deferred_tokens_, r->window);
  r->window = -1;
  // live and reservation already moved in add(), add_crossings() and add_swaps(); the request's
  // own figures catch up, with the blocks its tokens crossed into (a long window's), each of
  // which freed its oldest block if its crossings swap.
  const int64_t cap = span_tokens(*r);    // its blocks' end before them
  const bool swaps = crossings_swap(*r);  // as when its window opened: the same state
  r->tokens += tokens;
  const int64_t crossed = paged_ceil_div(r->tokens, block_tokens_) - r->skipped - r->held;
  if (crossed > 0) {
    KVSIM_CHECK(crossed <= crossed_blocks_ && (!swaps || crossed <= swapped_blocks_),
                "request {}: settling {} crossed blocks, {} taken, {} swapped", request, crossed,
                crossed_blocks_, swapped_blocks_);
    crossed_blocks_ -= crossed;
    if (swaps) {
      r->skipped += crossed;
      swapped_blocks_ -= crossed;
    } else {
      r->held += crossed;
    }
  }
  if (prefix_caching_) {
    // Its last block's room first, then the crossed blocks in order, as grow_blocks fills them.
    BlockTable& t = table(*r);
    const int64_t room = std::min(cap - (r->tokens - tokens), tokens);
    if (room > 0) blk(t.blocks.back()).filled += static_cast<int32_t>(room);
    int64_t left = tokens - room;
    for (int64_t i = 0; i < crossed; ++i) {
      const int32_t b = crossed_ids_.front();
      crossed_ids_.pop_front();
      blk(b).filled = static_cast<int32_t>(std::min(block_tokens_, left));
      left -= block_tokens_;
      t.blocks.push_back(b);
    }
    // Blocks its generated tokens filled are cached now (none is looked up before: only the
    // request itself knows their keys, and it settles before it releases them).
    if (t.owner >= 0) key_full_blocks(*r, t);
  }
  deferred_tokens_ -= tokens;
}

}  // namespace kvsim
