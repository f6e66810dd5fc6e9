// One KV cache group's block tables over the paged store's one BlockPool: vLLM's
// SingleTypeKVCacheManager (vllm/v1/core/single_type_kv_cache_manager.py) and its kinds,
// FullAttentionManager, SlidingWindowManager and ChunkedLocalAttentionManager, whose rules (which
// leading blocks a group no longer reads, its admission cap) are written once in kv_groups.h. The
// hybrid coordinator (hybrid_coordinator.h) keeps one manager per group and, per request, one
// table per manager; the manager keeps its group's held blocks and live tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "models/memory/block_pool.h"
#include "models/memory/kv_groups.h"

namespace kvsim {

class KvGroupManager {
 public:
  // A request's block table in this group: block ids, -1 for the leading ones freed (vLLM's null
  // block); `skipped` of them.
  struct Table {
    std::vector<int32_t> blocks;
    int64_t skipped = 0;
  };

  // Requires: block_tokens >= 1; `pool` (with block ids) outlives the manager.
  KvGroupManager(KvGroup spec, size_t id, int64_t block_tokens, int64_t bytes_per_token,
                 BlockPool& pool);

  const KvGroup& spec() const { return spec_; }
  // One token's KV in the group (its real layers).
  int64_t bytes_per_token() const { return bytes_per_token_; }
  // Blocks the group holds over every request (a shared block once), and their tokens.
  int64_t held_blocks() const { return held_; }
  int64_t live_tokens() const { return live_tokens_; }

  // The prefix-cache key of a sequence's block key in this group (vLLM's BlockHashWithGroupId).
  uint64_t group_key(uint64_t seq_key) const;
  // The oldest cached block of this group with the sequence key, or -1.
  int32_t cached_block(uint64_t seq_key) const { return pool_.cached_block(group_key(seq_key)); }
  bool cached(uint64_t seq_key) const { return pool_.cached(group_key(seq_key)); }

  // find_longest_cache_hit of this group's kind, at most `most` blocks, where `all_cached(i)` says
  // whether block i is cached in every group of the kind: full attention, the leading run;
  // chunked, the blocks before the hit's chunk free and the leading run inside it; a sliding
  // window, the last run of ceil((W - 1) / block) cached blocks, else the leading run.
  int64_t longest_cache_hit(const std::function<bool(int64_t)>& all_cached, int64_t most) const;

  // Leading blocks of a `computed`-token sequence the group no longer reads
  // (get_num_skipped_tokens, in blocks).
  int64_t skipped_blocks(int64_t computed) const {
    return kv_group_skipped_blocks(spec_, computed, block_tokens_);
  }
  // Blocks remove_skipped_blocks frees from t at `computed` tokens, and of those the ones that go
  // back to the pool (no other request shares them).
  int64_t frees(const Table& t, int64_t computed) const;
  int64_t frees_to_pool(const Table& t, int64_t computed) const;
  // Frees them, newest first, as remove_skipped_blocks hands them to the pool; returns how many.
  int64_t remove_skipped_blocks(Table& t, int64_t computed);
  // The fewest computed tokens at which remove_skipped_blocks would free one of t's blocks (the
  // table as it is: a deferral window adds no block); INT64_MAX when none would (full attention,
  // or every block of the table still read).
  int64_t next_free_at(const Table& t) const;

  // get_num_blocks_to_allocate for a new sequence whose table is `table` blocks with `hits`
  // leading hit blocks (`seq_keys(i)`): the blocks past the hits, and each hit inside the
  // group's window or chunk that sits cached on the free list (taking it takes a free block).
  int64_t blocks_to_allocate(const std::function<uint64_t(int64_t)>& seq_keys, int64_t hits,
                             int64_t table) const;
  // A new request's table with `hits` hit blocks: those before its window or chunk stay with the
  // null block, those inside are shared (allocate_new_computed_blocks).
  void share_hits(Table& t, const std::function<uint64_t(int64_t)>& seq_keys, int64_t hits);
  // Grows t to `tokens` tokens: fills its last block, then pops new ones (allocate_new_blocks).
  void allocate_new_blocks(Table& t, int64_t tokens);
  // Block crossings counted in aggregate: `n` empty blocks leave the pool now, held by the group
  // (appended to `taken`), and a request's table adopts them when its window settles.
  void take_blocks(int64_t n, std::vector<int32_t>& taken);
  // allocate_new_blocks with its new blocks from the back of `taken` instead of the pool.
  void adopt_blocks(Table& t, int64_t tokens, std::vector<int32_t>& taken);
  // Frees t's blocks, newest first, so that a prefix's tail is evicted before its head (free).
  void free(const Table& t);
  // Keys t's block i (if held) under the sequence key (cache_blocks).
  void cache_block(const Table& t, size_t i, uint64_t seq_key);
  // Whether another request holds t's block i too.
  bool shared(const Table& t, size_t i) const;
  // Drops the key of t's block i, if held.
  void uncache_block(const Table& t, size_t i);

  // Every block of t is this group's and the leading freed ones are within its skip rule at
  // `tokens`; adds one to `holders` per held block.
  void check_table(const Table& t, int64_t tokens, std::vector<int32_t>& holders) const;
  // The group's held blocks and live tokens, against the pool's records.
  void check_counts() const;

 private:
  int32_t pop_free();
  // allocate_new_blocks' fill, its new blocks from `taken` when given, else from the pool.
  void fill_to(Table& t, int64_t tokens, std::vector<int32_t>* taken);
  void touch(int32_t b);
  void unref(int32_t b);
  void set_filled(int32_t b, int64_t tokens);

  KvGroup spec_;
  int32_t id_;
  int64_t block_tokens_;
  int64_t bytes_per_token_;
  BlockPool& pool_;
  int64_t held_ = 0;
  int64_t live_tokens_ = 0;
};

}  // namespace kvsim
