// vLLM's hybrid KV cache manager for models with local and global attention layers (Gemma 3,
// gpt-oss, Llama 4): one pool of blocks shared by every KV cache group (kv_groups.h), and per
// request one block table per group, kept by the group's manager (kv_group_manager.h;
// vllm/v1/core/kv_cache_coordinator.py, HybridKVCacheCoordinator over one
// SingleTypeKVCacheManager per group, all drawing on one BlockPool). A table grows by a block every
// block_tokens tokens in every group; a local group frees the blocks before its window or chunk as
// the request grows (remove_skipped_blocks, before allocating), so it holds at most a window (or a
// chunk) and a block or two while the full groups hold the whole sequence. A freed entry of a table
// is vLLM's null block (-1 here).
//
// Prefix caching (hybrid_prefix_cache.cc): a group's full block is keyed by the request's block
// key and the group (vLLM's BlockHashWithGroupId); a lookup finds the longest prefix every group
// can serve (HybridKVCacheCoordinator.find_longest_cache_hit), a local group needing only the
// blocks inside its window or current chunk; freed blocks go to the back of the free list still
// keyed (findable until popped for someone else), a request's own in reverse order. Without prefix
// caching the block ids never matter to any figure (the free list's order is then unobserved).
// Deferred growth (hybrid_deferred.cc) ends before a growth that frees a local group's block;
// without prefix caching a long window runs across block boundaries, its crossings counted in
// aggregate (one block in every group each).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "models/memory/block_pool.h"
#include "models/memory/kv_group_manager.h"
#include "models/memory/kv_groups.h"
#include "models/memory/kv_store.h"

namespace kvsim {

// The several-group half of the one paged store (paged_store.h): PagedStore forwards every call
// about requests to it when the model has several KV cache groups. It is no KvStore of its own.
class HybridKvCoordinator {
 public:
  // Requires: block_tokens >= 1, a layout with at least one group, a pool with block ids that
  // outlives the coordinator.
  HybridKvCoordinator(KvGroupLayout layout, int64_t block_tokens, BlockPool& pool,
                      bool prefix_caching);

  // Every layer's K and V of one token (what a token costs before any window frees it).
  int64_t kv_bytes_per_token() const { return bytes_per_token_; }
  AllocResult allocate(RequestId request, int64_t prompt_tokens, int64_t max_total_tokens,
                       const PrefixHashes& prefix);
  AllocResult grow(RequestId request, int64_t new_total_tokens);
  void release(RequestId request);
  bool holds(RequestId request) const { return reqs_.count(request) != 0; }
  int64_t tokens(RequestId request) const;
  int64_t tokens_until_growth_allocates(RequestId request) const;
  KvUsage usage() const;
  void check_invariants() const;

  // DeferredGrowth (kv_capabilities.h). open(): inside a request's last block, the room is the
  // block's slack up to max_total, ending before the first growth that would free a block of a
  // local group (stepping's grow frees it then; that growth goes to grow()). Each deferred token
  // turns one reservation token of every group live.
  int64_t open(RequestId request);
  void add(int64_t tokens);
  void settle(RequestId request, int64_t tokens);
  int64_t outstanding() const { return deferred_tokens_; }
  // Crossings in aggregate: without prefix caching (then no figure depends on which block id a
  // request holds, so a crossing's blocks may leave the pool before their request is known).
  bool crossings_in_aggregate() const { return !prefix_caching_; }
  // A long window: to max_total, across block boundaries, still ending before the first growth
  // that would free a local group's block. Requires: crossings_in_aggregate().
  int64_t open_long(RequestId request);
  // `n` tokens that each start a new full block of an open long window: one block in every group
  // each leaves the pool now (Requires: n x groups <= free blocks); settle() attributes them.
  void add_crossings(int64_t n);
  // Requires: swaps == 0 (no window swaps here); nullopt otherwise.
  std::optional<KvUsage> usage_after(int64_t tokens, int64_t crossings, int64_t swaps) const;

  // PagedBlocks' figures, over every group.
  int64_t prefix_hit_blocks() const { return prefix_hits_; }
  int64_t cached_prefix_tokens(const PrefixHashes& prefix, int64_t tokens) const;
  // Per group: a block per block_tokens not hit, and each hit inside the group's window or chunk
  // that sits cached on the free list.
  int64_t blocks_to_allocate(const PrefixHashes& prefix, int64_t tokens) const;
  // The same with each local group's table capped (kv_group_admission_blocks).
  int64_t admission_blocks(const PrefixHashes& prefix, int64_t tokens, int64_t batched) const;
  int64_t blocks_to_grow(RequestId request, int64_t tokens) const;
  int64_t window_freed_blocks() const { return window_freed_; }
  int64_t window_frees(RequestId request, int64_t target) const;
  void uncache_past(RequestId request, int64_t tokens);

  const KvGroupLayout& layout() const { return layout_; }
  int64_t block_bytes() const { return block_bytes_; }
  // Group g's manager: its held blocks (over every request, a shared block once), its rules.
  const KvGroupManager& group(size_t g) const { return managers_[g]; }
  // Blocks `request` holds in group g. Requires: holds(request).
  int64_t held_blocks(RequestId request, size_t g) const;
  // Blocks `request` holds over every group (each group's blocks are pages of the one pool).
  int64_t held_blocks(RequestId request) const;
  // Request's block ids in group g, -1 for those freed (tests).
  const std::vector<int32_t>& block_table(RequestId request, size_t g) const;

 private:
  struct Req {
    int64_t tokens = 0;
    int64_t max_total = 0;
    std::vector<KvGroupManager::Table> tables;  // one per group
    std::vector<uint64_t> keys;  // block keys of its prompt's hashed blocks (prefix caching)
    int64_t owner = -1;          // its own full blocks past `keys` are keyed as this request's
    size_t keyed = 0;            // leading block indexes keyed (or hit) in every group
    int64_t window = -1;         // room of its open deferral window; -1: closed
  };
  const Req& held_req(RequestId request, const char* op) const;
  // The held request, KVSIM_CHECKed with its deferral window closed (`op` names the call).
  Req& closed_req(RequestId request, const char* op);
  const Req& closed_req(RequestId request, const char* op) const;
  // usage() after `tokens` more deferred tokens, `crossings` of them each starting a new block in
  // every group.
  KvUsage usage_with(int64_t tokens, int64_t crossings) const;
  int64_t free_blocks() const { return pool_.free_count(); }
  void add_reservation(const Req& r, int sign);

  // Prefix caching (hybrid_prefix_cache.cc).
  int64_t lookup_blocks(const PrefixHashes& prefix, int64_t tokens) const;
  uint64_t seq_key(const PrefixHashes& prefix, int64_t i) const;  // block i's key, every group
  // The longest hit, in blocks, that every group serves (find_longest_cache_hit).
  int64_t hit_blocks(const PrefixHashes& prefix, int64_t tokens) const;
  // One attention type's hit at most `most` blocks long (its groups `gs`).
  int64_t type_hit(const PrefixHashes& prefix, const std::vector<size_t>& gs, int64_t most) const;
  // Free blocks a new sequence of `tokens` with `hits` hit blocks takes, each group's table
  // taken as table(g) blocks.
  int64_t new_blocks(const PrefixHashes& prefix, int64_t hits,
                     const std::function<int64_t(size_t)>& table) const;
  void key_full_blocks(Req& r);

  KvGroupLayout layout_;
  int64_t block_tokens_;
  int64_t num_blocks_;
  int64_t block_bytes_;
  int64_t bytes_per_token_;
  bool prefix_caching_;
  BlockPool& pool_;  // the store's one pool, for every group (prefix keys carry the group)
  std::vector<KvGroupManager> managers_;    // one per group
  std::vector<std::vector<size_t>> types_;  // groups by attention type, full attention first
  int64_t window_freed_ = 0;
  int64_t prefix_hits_ = 0;
  int64_t reservation_bytes_ = 0;
  int64_t deferred_tokens_ = 0;  // added, not yet settled
  // Per group, the blocks add_crossings() took and no settle() has attributed yet.
  std::vector<std::vector<int32_t>> crossed_;
  std::unordered_map<RequestId, Req> reqs_;
};

}  // namespace kvsim
