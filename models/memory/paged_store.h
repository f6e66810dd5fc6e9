// vLLM's paged KV store: a fixed pool of blocks of `block_tokens` tokens; a request holds
// ceil(tokens / block_tokens) blocks, so its waste is the slack in its last block.
// With prefix caching, block ids matter: free blocks form a FIFO list (an intrusive doubly-linked
// list: freed blocks go to the back, allocation pops the front, a cache hit takes a block out of
// the middle; allocate, free and "touch" are O(1)); full prompt blocks are keyed by the request's
// prefix hashes; equal keys share one ref-counted block, counted once, and a freed keyed block
// stays findable until it is popped for someone else (vLLM v1's BlockPool).
// Without prefix caching no block is shared and nothing is ever looked up by block, so no figure
// depends on which blocks a request holds: the store counts blocks (a request's held count, the
// free count) and allocating or freeing n blocks is one addition, whatever n is.
// A block is keyed once it is allocated full of prompt tokens (allocate, or grow for a chunked
// prefill's later chunks): the engine allocates exactly the tokens the coming iteration computes,
// so a keyed block holds KV that is computed by the end of that iteration (vLLM v1 caches blocks
// in KVCacheManager.allocate_slots, when the tokens filling them are scheduled).
// Sliding-window attention (sliding_window > 0): when a request grows, its leading blocks that
// lie wholly before the window of its computed tokens are freed (vLLM v1's SlidingWindowManager.
// remove_skipped_blocks: blocks before num_computed_tokens - window + 1), so a decoding sequence
// holds at most ceil(window / block_tokens) + 1 blocks. With prefix caching a freed block stays
// cached (findable) until it is popped for someone else.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "models/memory/block_pool.h"
#include "models/memory/hybrid_coordinator.h"
#include "models/memory/id_index.h"
#include "models/memory/kv_capabilities.h"
#include "models/memory/kv_groups.h"
#include "models/memory/kv_store.h"
#include "models/memory/store_accounts.h"

namespace kvsim {

struct PagedStoreOptions {
  int64_t block_tokens = 16;
  int64_t num_blocks = 0;
  bool enable_prefix_caching = false;
  int64_t sliding_window = 0;  // tokens a query attends to; 0: full attention
};

class PagedStore final : public KvStore, public PagedBlocks, public DeferredGrowth {
 public:
  // One KV cache group (a dense model: full attention, or a sliding window on every layer).
  // Requires: block_tokens >= 1, num_blocks >= 1, kv_bytes_per_token >= 1, sliding_window >= 0.
  PagedStore(int64_t kv_bytes_per_token, PagedStoreOptions options);
  // Several KV cache groups over the one pool (a hybrid model's layout, kv_groups.h): every call
  // about requests goes to the hybrid coordinator, deferred growth included (windows that end
  // before a local group's next free; crossings in aggregate without prefix caching).
  // Requires: block_tokens >= 1, num_blocks >= 1, a layout with at least one group.
  PagedStore(KvGroupLayout layout, int64_t block_tokens, int64_t num_blocks,
             bool prefix_caching = false);
  // The hybrid coordinator holds a reference to the pool: the store stays where it is built.
  PagedStore(const PagedStore&) = delete;
  PagedStore& operator=(const PagedStore&) = delete;

  std::string_view type() const override { return "paged"; }
  int64_t kv_bytes_per_token() const override { return bytes_per_token_; }
  bool preallocated() const override { return true; }
  AllocResult allocate(RequestId request, int64_t prompt_tokens, int64_t max_total_tokens,
                       const PrefixHashes& prefix = {}) override;
  AllocResult grow(RequestId request, int64_t new_total_tokens) override;
  AllocResult grow_to_at_least(RequestId request, int64_t tokens) override;
  void release(RequestId request) override;
  bool holds(RequestId request) const override {
    if (groups_) [[unlikely]]
      return groups_->holds(request);
    return index_.find(request) != IdIndex::kNone;
  }
  int64_t tokens(RequestId request) const override;
  int64_t tokens_until_growth_allocates(RequestId request) const override;
  KvUsage usage() const override;
  void check_invariants() const override;
  const PagedBlocks* paged() const override { return this; }
  // With several groups, the hybrid coordinator's (HybridKvCoordinator::open, open_long).
  DeferredGrowth* deferred_growth() override { return this; }
  // The pool's key events, for one group (a hybrid model's group keys name no prompt prefix a
  // router could look up: its GPU blocks send none).
  void set_event_sink(KvEventSink sink) override {
    if (groups_ == nullptr) pool_.set_event_sink(std::move(sink), block_tokens_);
  }

  // PagedBlocks
  int64_t free_blocks() const override { return pool_.free_count(); }
  int64_t total_blocks() const override { return num_blocks_; }
  int64_t block_tokens() const override { return block_tokens_; }
  int64_t prefix_hit_blocks() const override {
    return groups_ ? groups_->prefix_hit_blocks() : prefix_hits_;
  }
  bool prefix_caching() const override { return prefix_caching_; }
  int64_t cached_prefix_tokens(const PrefixHashes& prefix, int64_t tokens) const override;
  int64_t blocks_to_allocate(const PrefixHashes& prefix, int64_t tokens) const override;
  int64_t admission_blocks(const PrefixHashes& prefix, int64_t tokens,
                           int64_t batched) const override;
  int64_t blocks_to_grow(RequestId request, int64_t tokens) const override;

  // DeferredGrowth: a request's room is the slack of its last block up to its max_total.
  int64_t open(RequestId request) override;
  void add(int64_t tokens) override;
  void settle(RequestId request, int64_t tokens) override;
  int64_t outstanding() const override {
    return groups_ ? groups_->outstanding() : deferred_tokens_;
  }
  // With prefix caching the crossed blocks leave the free list at add_crossings() and reach
  // their requests' tables at settle(). With a sliding window a long window ends before the
  // first crossing whose growth would free blocks that left the window (open_long). With several
  // groups, without prefix caching (HybridKvCoordinator::open_long).
  bool crossings_in_aggregate() const override {
    return groups_ == nullptr || groups_->crossings_in_aggregate();
  }
  int64_t open_long(RequestId request) override;
  void add_crossings(int64_t n) override;
  bool long_window_swaps(RequestId request) const override;
  void add_swaps(int64_t n) override;
  std::optional<KvUsage> usage_after(int64_t tokens, int64_t crossings,
                                     int64_t swaps = 0) const override;

  int64_t block_bytes() const { return block_bytes_; }
  // Blocks a request holds now (shared ones included); with a sliding window, not those freed
  // from its front. Requires: holds(request).
  int64_t held_blocks(RequestId request) const override {
    if (groups_) [[unlikely]]
      return groups_->held_blocks(request);
    return held(request, "held_blocks").held;
  }
  // Their ids, in order. Kept only with prefix caching (see the top of this file).
  // Requires: holds(request), prefix_caching().
  const std::vector<int32_t>& block_table(RequestId request) const;
  int64_t window_freed_blocks() const override {
    return groups_ ? groups_->window_freed_blocks() : window_freed_;
  }
  int64_t window_frees(RequestId request, int64_t target) const override;
  void uncache_past(RequestId request, int64_t tokens) override;
  // The hybrid coordinator of a store of several groups (per-group figures and block tables), or
  // nullptr with one group.
  const HybridKvCoordinator* groups() const { return groups_.get(); }

 private:
  // A held request's figures, read on every call about it: kept apart from its block ids so
  // that a slot is 48 bytes and the live slots stay in cache.
  struct Req {
    RequestId id = -1;  // -1: a free slot
    int64_t tokens = 0;
    int64_t max_total = 0;
    int64_t window = -1;  // room of its open deferral window; -1: closed
    int64_t held = 0;     // blocks it holds now
    int64_t skipped = 0;  // sliding window: leading blocks already freed (before the window)
  };
  // Prefix caching only: a request's block ids (held of them), the keys of its full prompt
  // blocks, and how many leading blocks are keyed (or were shared hits) so far.
  struct BlockTable {
    std::vector<int32_t> blocks;
    std::vector<uint64_t> keys;
    size_t keyed = 0;
    int64_t owner = -1;  // full blocks past `keys` are keyed as this request's own (-1: none)
  };
  // Token capacity up to the end of the request's last block, freed leading blocks included.
  // The one attention type of every layer, as a KV cache group: its window's skip rule.
  KvGroup window_group() const { return {KvGroup::Kind::kSlidingWindow, sliding_window_, {}}; }
  int64_t span_tokens(const Req& r) const { return (r.skipped + r.held) * block_tokens_; }
  // Sliding window: how many more leading blocks of `r` lie wholly before the window of its
  // `tokens` (by default its r.tokens) computed tokens (0 without a window).
  int64_t blocks_to_skip(const Req& r) const { return blocks_to_skip(r, r.tokens); }
  int64_t blocks_to_skip(const Req& r, int64_t tokens) const;
  // Of the first n blocks of `r`, those its freeing returns to the free list: all n, but for
  // blocks another request shares (prefix caching).
  int64_t skip_frees(const Req& r, int64_t n) const;
  // Whether every crossing of a long window opened from r's state frees exactly one leading
  // block: the first does (with a sliding window, past it by a block), and each later one then
  // too. Not with prefix caching (a freed block may stay shared or keep its prefix).
  bool crossings_swap(const Req& r) const;
  // Frees `r`'s first n blocks (full ones; shared ones stay held by their other owners).
  void skip_window_blocks(Req& r, int64_t n);
  // Blocks of the prompt `prefix` describes that can be keyed: those that end inside the prompt
  // (at most `limit` tokens when prefix.prompt_tokens is unset) and inside the hashes.
  int64_t keyable_blocks(const PrefixHashes& prefix, int64_t limit) const;
  // The request whose own blocks `prefix` keys (PrefixHashes::owner), or -1: none (no prefix
  // caching, a sliding window, no owner).
  int64_t owner_of(const PrefixHashes& prefix) const;
  // Leading blocks of a `tokens`-token sequence that a lookup may find: keyable_blocks, or with
  // an owner every full block.
  int64_t lookup_blocks(const PrefixHashes& prefix, int64_t tokens) const;
  static uint64_t own_key(int64_t owner, int64_t i);
  // Key of block `i` (< lookup_blocks): from the hashes, or the owner's own past them.
  uint64_t key_of(const PrefixHashes& prefix, int64_t i) const;
  // Keys the request's full prompt blocks up to its tokens (prefix caching).
  void key_full_blocks(const Req& r, BlockTable& t);
  // The slot of held `request`, KVSIM_CHECKed held and with no deferral window open (`op` names
  // the call for the message).
  Req& held(RequestId request, const char* op) {
    Req* r = find(request);
    if (r == nullptr || r->window >= 0) [[unlikely]]
      fail_held(r, request, op);
    return *r;
  }
  const Req& held(RequestId request, const char* op) const {
    const Req* r = find(request);
    if (r == nullptr || r->window >= 0) [[unlikely]]
      fail_held(r, request, op);
    return *r;
  }
  [[noreturn]] static void fail_held(const Req* r, RequestId request, const char* op);
  // The request's slot; nullptr when it holds no KV.
  Req* find(RequestId request) {
    const int32_t s = index_.find(request);
    return s == IdIndex::kNone ? nullptr : &slots_[static_cast<size_t>(s)];
  }
  const Req* find(RequestId request) const {
    const int32_t s = index_.find(request);
    return s == IdIndex::kNone ? nullptr : &slots_[static_cast<size_t>(s)];
  }
  BlockTable& table(const Req& r) { return tables_[static_cast<size_t>(&r - slots_.data())]; }
  const BlockTable& table(const Req& r) const {
    return tables_[static_cast<size_t>(&r - slots_.data())];
  }
  AllocResult grow_req(Req& r, int64_t new_total_tokens);
  // A growth or allocation of `blocks` that the free blocks cannot serve.
  AllocResult capacity_failure(int64_t blocks) const;
  // Prefix caching: grow_req's block work, `need` new blocks after filling the last one's room
  // (r.tokens and r.held not yet updated).
  void grow_blocks(Req& r, int64_t new_total_tokens, int64_t need);
  // Adds (sign +1) or removes (sign -1) the slack of r's last block: reservation up to
  // max_total, internal beyond it.
  void add_slack(const Req& r, int sign) {
    const int64_t cap = span_tokens(r);
    const int64_t reservation = reservation_tokens(r.tokens, cap, r.max_total);
    reservation_tokens_ += sign * reservation;
    internal_tokens_ += sign * (cap - r.tokens - reservation);
  }
  // A block of the pool leaves the free list for this store (prefix caching); unref: its tokens
  // leave the live count when it is freed.
  int32_t pop_free() { return pool_.pop_free(); }
  void unref(int32_t b);
  void check_block_records() const;

  int64_t bytes_per_token_;
  int64_t block_tokens_;
  int64_t num_blocks_;
  int64_t block_bytes_;
  bool prefix_caching_;
  int64_t sliding_window_;
  int64_t window_freed_ = 0;
  // The block pool: with prefix caching block records, the free list (oldest first) and the
  // prefix-key index; without, a free count.
  BlockPool pool_;
  // Several groups: the coordinator of their managers over pool_ (nullptr: one group).
  std::unique_ptr<HybridKvCoordinator> groups_;
  BlockPool::Block& blk(int32_t b) { return pool_.block(b); }
  const BlockPool::Block& blk(int32_t b) const { return pool_.block(b); }
  int64_t live_tokens_ = 0;         // tokens in held blocks
  int64_t reservation_tokens_ = 0;  // slack in last blocks a request may still fill
  int64_t internal_tokens_ = 0;     // slack in last blocks past max_total
  int64_t prefix_hits_ = 0;
  int64_t deferred_tokens_ = 0;
  int64_t crossed_blocks_ = 0;       // taken by add_crossings(), not yet attributed by settle()
  int64_t swapped_blocks_ = 0;       // of those, by add_swaps(): as many freed, not yet attributed
  std::deque<int32_t> crossed_ids_;  // with prefix caching: those blocks, oldest first
  // The totals add() and add_crossings() move: `tokens` deferred tokens become live, `crossings`
  // of them each in a new block (off the free list) whose other tokens are reservation. One
  // formula for the store and for usage_after().
  // `swaps` of the crossings also free a full block each (add_swaps).
  struct GrowthTotals {
    int64_t free_count, live_tokens, reservation_tokens;
  };
  static void grow_totals(GrowthTotals& g, int64_t tokens, int64_t crossings, int64_t swaps,
                          int64_t block_tokens) {
    g.free_count -= crossings - swaps;
    g.live_tokens += tokens - swaps * block_tokens;
    g.reservation_tokens += crossings * block_tokens - tokens;
  }
  void grow_totals(int64_t tokens, int64_t crossings, int64_t swaps = 0);
  KvUsage usage_of(const GrowthTotals& g) const;
  std::vector<int32_t> hit_scratch_;  // allocate()'s shared blocks (reused)
  // Requests holding KV: dense slots (freed slots are reused, with their block tables' capacity,
  // so steady-state growth does not allocate) found through a small hash index. tables_ runs
  // beside slots_ with prefix caching and is empty without.
  std::vector<Req> slots_;
  std::vector<BlockTable> tables_;
  std::vector<int32_t> free_slots_;
  IdIndex index_;
};

}  // namespace kvsim
