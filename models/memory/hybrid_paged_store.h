// vLLM's hybrid KV cache manager for models with local and global attention layers (Gemma 3,
// gpt-oss, Llama 4): one pool of blocks shared by every KV cache group (kv_groups.h), and per
// request one block table per group (vllm/v1/core/kv_cache_coordinator.py,
// HybridKVCacheCoordinator over one SingleTypeKVCacheManager per group). A table grows by a
// block every block_tokens tokens in every group; a local group frees the blocks before its
// window or chunk as the request grows (remove_skipped_blocks, before allocating), so it holds at
// most a window (or a chunk) and a block or two while the full groups hold the whole sequence.
// Without prefix caching no figure depends on which blocks a request holds, so a table is kept
// as its length and its freed front (vLLM points that front at its null block). Prefix caching
// and the deferred growth of fast-forward are not offered: the engine steps hybrid models token
// by token (docs/models.md "Hybrid KV").
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "models/memory/kv_capabilities.h"
#include "models/memory/kv_groups.h"
#include "models/memory/kv_store.h"

namespace kvsim {

class HybridPagedStore final : public KvStore, public PagedBlocks {
 public:
  // Requires: block_tokens >= 1, num_blocks >= 1, a layout with at least one group.
  HybridPagedStore(KvGroupLayout layout, int64_t block_tokens, int64_t num_blocks);

  std::string_view type() const override { return "paged"; }
  // Every layer's K and V of one token (what a token costs before any window frees it).
  int64_t kv_bytes_per_token() const override { return bytes_per_token_; }
  bool preallocated() const override { return true; }
  AllocResult allocate(RequestId request, int64_t prompt_tokens, int64_t max_total_tokens,
                       const PrefixHashes& prefix = {}) override;
  AllocResult grow(RequestId request, int64_t new_total_tokens) override;
  void release(RequestId request) override;
  bool holds(RequestId request) const override { return reqs_.count(request) != 0; }
  int64_t tokens(RequestId request) const override;
  int64_t tokens_until_growth_allocates(RequestId request) const override;
  KvUsage usage() const override;
  void check_invariants() const override;
  const PagedBlocks* paged() const override { return this; }

  // PagedBlocks
  int64_t free_blocks() const override { return free_; }
  int64_t total_blocks() const override { return num_blocks_; }
  int64_t block_tokens() const override { return block_tokens_; }
  int64_t prefix_hit_blocks() const override { return 0; }
  bool prefix_caching() const override { return false; }
  int64_t cached_prefix_tokens(const PrefixHashes&, int64_t) const override { return 0; }
  // A block per block_tokens in every group: nothing is computed yet, nothing freed.
  int64_t blocks_to_allocate(const PrefixHashes& prefix, int64_t tokens) const override;
  // Each group's table, a local group's capped at what it ever holds (kv_group_admission_blocks).
  int64_t admission_blocks(const PrefixHashes& prefix, int64_t tokens,
                           int64_t batched) const override;
  int64_t blocks_to_grow(RequestId request, int64_t tokens) const override;
  int64_t window_freed_blocks() const override { return window_freed_; }
  int64_t window_frees(RequestId request, int64_t target) const override;
  // No prefix caching here (it is refused for hybrid models): no key to take off.
  void uncache_past(RequestId, int64_t) override {}

  const KvGroupLayout& layout() const { return layout_; }
  int64_t block_bytes() const { return block_bytes_; }
  // Blocks group g holds now, over every request.
  int64_t group_held_blocks(size_t g) const { return group_held_[g]; }
  // Blocks `request` holds in group g. Requires: holds(request).
  int64_t held_blocks(RequestId request, size_t g) const;
  // Blocks `request` holds over every group (each group's blocks are pages of the one pool).
  int64_t held_blocks(RequestId request) const override;

 private:
  struct Req {
    int64_t tokens = 0;
    int64_t max_total = 0;
    std::vector<int64_t> held;     // per group: blocks held
    std::vector<int64_t> skipped;  // per group: leading blocks freed (left the window or chunk)
  };
  const Req& held_req(RequestId request, const char* op) const;
  // The request's live and reservation bytes, added (sign +1) or removed (-1) from the totals.
  void account(const Req& r, int sign);
  // Blocks group g of `r` frees when `computed` tokens are computed.
  int64_t frees(const Req& r, size_t g, int64_t computed) const;

  KvGroupLayout layout_;
  int64_t block_tokens_;
  int64_t num_blocks_;
  int64_t block_bytes_;
  int64_t bytes_per_token_;
  int64_t free_;
  int64_t window_freed_ = 0;
  int64_t live_bytes_ = 0;
  int64_t reservation_bytes_ = 0;
  std::vector<int64_t> group_held_;
  std::unordered_map<RequestId, Req> reqs_;
};

}  // namespace kvsim
