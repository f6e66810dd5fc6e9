// vLLM's hybrid KV cache manager for models with local and global attention layers (Gemma 3,
// gpt-oss, Llama 4): one pool of blocks shared by every KV cache group (kv_groups.h), and per
// request one block table per group (vllm/v1/core/kv_cache_coordinator.py,
// HybridKVCacheCoordinator over one SingleTypeKVCacheManager per group, all drawing on one
// BlockPool). A table grows by a block every block_tokens tokens in every group; a local group
// frees the blocks before its window or chunk as the request grows (remove_skipped_blocks, before
// allocating), so it holds at most a window (or a chunk) and a block or two while the full groups
// hold the whole sequence. A freed entry of a table is vLLM's null block (-1 here).
//
// Prefix caching (hybrid_prefix_cache.cc): a group's full block is keyed by the request's block
// key and the group (vLLM's BlockHashWithGroupId); a lookup finds the longest prefix every group
// can serve (HybridKVCacheCoordinator.find_longest_cache_hit), a local group needing only the
// blocks inside its window or current chunk; freed blocks go to the back of the free list still
// keyed (findable until popped for someone else), a request's own in reverse order. Without prefix
// caching the block ids never matter to any figure (the free list's order is then unobserved).
// The deferred growth of fast-forward is not offered: the engine steps hybrid models token by
// token (docs/models.md "Hybrid KV").
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
  HybridPagedStore(KvGroupLayout layout, int64_t block_tokens, int64_t num_blocks,
                   bool prefix_caching = false);

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
  int64_t prefix_hit_blocks() const override { return prefix_hits_; }
  bool prefix_caching() const override { return prefix_caching_; }
  int64_t cached_prefix_tokens(const PrefixHashes& prefix, int64_t tokens) const override;
  // Per group: a block per block_tokens not hit, and each hit inside the group's window or chunk
  // that sits cached on the free list.
  int64_t blocks_to_allocate(const PrefixHashes& prefix, int64_t tokens) const override;
  // The same with each local group's table capped (kv_group_admission_blocks).
  int64_t admission_blocks(const PrefixHashes& prefix, int64_t tokens,
                           int64_t batched) const override;
  int64_t blocks_to_grow(RequestId request, int64_t tokens) const override;
  int64_t window_freed_blocks() const override { return window_freed_; }
  int64_t window_frees(RequestId request, int64_t target) const override;
  void uncache_past(RequestId request, int64_t tokens) override;

  const KvGroupLayout& layout() const { return layout_; }
  int64_t block_bytes() const { return block_bytes_; }
  // Blocks group g holds now, over every request (a shared block once).
  int64_t group_held_blocks(size_t g) const { return group_held_[g]; }
  // Blocks `request` holds in group g. Requires: holds(request).
  int64_t held_blocks(RequestId request, size_t g) const;
  // Blocks `request` holds over every group (each group's blocks are pages of the one pool).
  int64_t held_blocks(RequestId request) const override;
  // Request's block ids in group g, -1 for those freed (tests).
  const std::vector<int32_t>& block_table(RequestId request, size_t g) const;

 private:
  struct Req {
    int64_t tokens = 0;
    int64_t max_total = 0;
    std::vector<std::vector<int32_t>> tables;  // per group; -1: freed (the null block)
    std::vector<int64_t> skipped;              // per group: leading entries freed
    std::vector<uint64_t> keys;  // block keys of its prompt's hashed blocks (prefix caching)
    int64_t owner = -1;          // its own full blocks past `keys` are keyed as this request's
    size_t keyed = 0;            // leading block indexes keyed (or hit) in every group
  };
  struct Block {
    int32_t ref = 0;
    int32_t filled = 0;  // tokens in it (kept while a freed block stays cached)
    int32_t prev = -1, next = -1;
    int32_t group = 0;
    uint64_t key = 0;  // 0: none
  };
  const Req& held_req(RequestId request, const char* op) const;
  // Blocks group g of `r` frees when `computed` tokens are computed, and of those, the ones that
  // return to the free list (not shared with another request).
  int64_t frees(const Req& r, size_t g, int64_t computed) const;
  int64_t frees_to_pool(const Req& r, size_t g, int64_t computed) const;
  // Frees group g's blocks that left its window or chunk at r.tokens computed, newest first.
  void skip_blocks(Req& r, size_t g);
  // Grows group g's table to `tokens` tokens: fills its last block, pops new ones.
  void extend_table(Req& r, size_t g, int64_t tokens);
  void add_reservation(const Req& r, int sign);

  // Prefix caching (hybrid_prefix_cache.cc).
  int64_t lookup_blocks(const PrefixHashes& prefix, int64_t tokens) const;
  uint64_t seq_key(const PrefixHashes& prefix, int64_t i) const;  // block i's key, every group
  static uint64_t group_key(uint64_t key, size_t g);
  bool cached(uint64_t key) const { return by_key_.count(key) != 0; }
  // The longest hit, in blocks, that every group serves (find_longest_cache_hit).
  int64_t hit_blocks(const PrefixHashes& prefix, int64_t tokens) const;
  // One attention type's hit at most `most` blocks long (its groups `gs`).
  int64_t type_hit(const PrefixHashes& prefix, const std::vector<size_t>& gs, int64_t most) const;
  // The cached block of group g for key index i (the oldest copy).
  int32_t hit_block(const PrefixHashes& prefix, size_t g, int64_t i) const;
  // Free blocks a new sequence of `tokens` with `hits` hit blocks takes in group g, its table
  // taken as `table` blocks (vLLM's get_num_blocks_to_allocate, evictable hits counted).
  int64_t group_blocks_to_allocate(const PrefixHashes& prefix, size_t g, int64_t hits,
                                   int64_t table) const;
  void key_full_blocks(Req& r);
  void index_key(int32_t b, uint64_t key);
  void unindex_key(int32_t b);

  // The block pool.
  int32_t pop_free(size_t g);
  void unlink(int32_t b);
  void push_free_back(int32_t b);
  void touch(int32_t b);  // a hit: one more holder (off the free list if it was free)
  void unref(int32_t b);
  void set_filled(int32_t b, int64_t tokens);
  void check_blocks() const;

  KvGroupLayout layout_;
  int64_t block_tokens_;
  int64_t num_blocks_;
  int64_t block_bytes_;
  int64_t bytes_per_token_;
  bool prefix_caching_;
  std::vector<std::vector<size_t>> types_;  // groups by attention type, full attention first
  std::vector<Block> blocks_;
  int32_t head_ = -1, tail_ = -1;  // the free list, oldest first
  int64_t free_;
  int64_t window_freed_ = 0;
  int64_t prefix_hits_ = 0;
  int64_t live_bytes_ = 0;
  int64_t reservation_bytes_ = 0;
  std::vector<int64_t> group_held_;
  std::unordered_map<RequestId, Req> reqs_;
  // Key -> its cached blocks, oldest first (vLLM's BlockHashToBlockMap: get_one_block returns
  // the first still cached; evicting one leaves the others findable).
  std::unordered_map<uint64_t, std::vector<int32_t>> by_key_;
};

}  // namespace kvsim
