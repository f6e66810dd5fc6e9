// One KV cache group's manager over the block pool (kv_group_manager.h; vLLM's
// SingleTypeKVCacheManager and its full-attention, sliding-window and chunked kinds in
// vllm/v1/core/single_type_kv_cache_manager.py). Every figure is derived by hand in the comments.
#include <catch2/catch.hpp>

#include <limits>
#include <set>

#include "models/memory/block_pool.h"
#include "models/memory/kv_group_manager.h"

using namespace kvsim;

namespace {

KvGroupManager group_manager_of(KvGroup::Kind kind, int64_t span, size_t id, BlockPool& pool) {
  return KvGroupManager(KvGroup{kind, span, {}}, id, /*block_tokens=*/16, /*bytes_per_token=*/2,
                        pool);
}

uint64_t group_manager_key(int64_t i) { return 100 + static_cast<uint64_t>(i); }

}  // namespace

TEST_CASE("Group manager: each kind's longest cache hit", "[memory][group_manager]") {
  BlockPool pool(4, /*block_ids=*/true);
  // Blocks 0 1 _ 3 4 5 cached (2 missing), at most 6 blocks of 16 tokens.
  const std::set<int64_t> cached = {0, 1, 3, 4, 5};
  const auto is_cached = [&](int64_t i) { return cached.count(i) != 0; };
  // Full attention: the leading run, 0 and 1.
  CHECK(group_manager_of(KvGroup::Kind::kFull, 0, 0, pool).longest_cache_hit(is_cached, 6) == 2);
  // A window of 49 needs ceil(48 / 16) = 3 contiguous cached blocks, right to left: 5, 4, 3, so
  // the hit ends after block 5: 6 blocks.
  CHECK(group_manager_of(KvGroup::Kind::kSlidingWindow, 49, 0, pool)
            .longest_cache_hit(is_cached, 6) == 6);
  // A window of 65 needs 4: 5 4 3 is a run of 3, broken by 2; then 1 0 is 2 at block 0: the
  // leading run, 2 blocks.
  CHECK(group_manager_of(KvGroup::Kind::kSlidingWindow, 65, 0, pool)
            .longest_cache_hit(is_cached, 6) == 2);
  // A chunk of 64 tokens (4 blocks): the 6-block candidate ends in the chunk of blocks 4-7, so
  // blocks 0-3 need no lookup (the missing block 2 does not matter) and 4, 5 are cached: 6.
  CHECK(group_manager_of(KvGroup::Kind::kChunked, 64, 0, pool).longest_cache_hit(is_cached, 6) ==
        6);
}

TEST_CASE("Group manager: a window frees its skipped blocks newest first",
          "[memory][group_manager]") {
  BlockPool pool(10, /*block_ids=*/true);
  KvGroupManager m = group_manager_of(KvGroup::Kind::kSlidingWindow, 32, 0, pool);
  KvGroupManager::Table t;
  m.allocate_new_blocks(t, 64);  // blocks 0-3, 16 tokens each
  CHECK(t.blocks == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(m.live_tokens() == 64);
  // Block 0 leaves the window once (c - 32 + 1) / 16 >= 1: c = 16 + 31 = 47 computed tokens.
  CHECK(m.next_free_at(t) == 47);
  // 64 computed tokens, a window of 32: tokens before 64 - 32 + 1 = 33 are skipped, 33 / 16 = 2
  // whole blocks: 0 and 1, both back to the pool (no one shares them).
  CHECK(m.frees(t, 64) == 2);
  CHECK(m.frees_to_pool(t, 64) == 2);
  CHECK(m.remove_skipped_blocks(t, 64) == 2);
  CHECK(t.blocks == std::vector<int32_t>{-1, -1, 2, 3});
  CHECK(t.skipped == 2);
  CHECK(m.next_free_at(t) == 3 * 16 + 31);  // block 2 next: 79
  CHECK(m.held_blocks() == 2);
  CHECK(m.live_tokens() == 32);
  // Freed newest first (1, then 0) behind the never-used 4-9: a table of 8 blocks takes
  // 4 5 6 7 8 9 1 0.
  KvGroupManager::Table u;
  m.allocate_new_blocks(u, 8 * 16);
  CHECK(u.blocks == std::vector<int32_t>{4, 5, 6, 7, 8, 9, 1, 0});
  CHECK(pool.free_count() == 0);
  CHECK(m.held_blocks() == 10);
  CHECK(m.live_tokens() == 32 + 128);
  m.check_counts();
}

TEST_CASE("Group manager: new blocks and shared hits, a window sharing only its own",
          "[memory][group_manager]") {
  BlockPool pool(8, /*block_ids=*/true);
  KvGroupManager full = group_manager_of(KvGroup::Kind::kFull, 0, 0, pool);
  KvGroupManager sliding = group_manager_of(KvGroup::Kind::kSlidingWindow, 17, 1, pool);
  // A request of 48 tokens in both groups: full takes 0-2, sliding 3-5, keyed 100-102 (each
  // group's keys its own). Freed newest first: queue 6 7 2 1 0 5 4 3, all 8 free and cached.
  KvGroupManager::Table a_full, a_sliding;
  full.allocate_new_blocks(a_full, 48);
  sliding.allocate_new_blocks(a_sliding, 48);
  for (size_t i = 0; i < 3; ++i) {
    full.cache_block(a_full, i, group_manager_key(static_cast<int64_t>(i)));
    sliding.cache_block(a_sliding, i, group_manager_key(static_cast<int64_t>(i)));
  }
  CHECK(full.cached_block(100) == 0);
  CHECK(sliding.cached_block(100) == 3);
  full.free(a_full);
  sliding.free(a_sliding);
  CHECK(pool.free_count() == 8);
  // A 4-block table with a 3-block hit. Full attention: the block past the hit, and the 3 hits
  // sit on the free list: 1 + 3 = 4. The window of 17 skips tokens before 48 - 17 + 1 = 32, 2
  // blocks: only hit 2 (block 5, free) is taken, 1 + 1 = 2.
  CHECK(full.blocks_to_allocate(group_manager_key, 3, 4) == 4);
  CHECK(sliding.blocks_to_allocate(group_manager_key, 3, 4) == 2);
  KvGroupManager::Table b_full, b_sliding;
  full.share_hits(b_full, group_manager_key, 3);
  sliding.share_hits(b_sliding, group_manager_key, 3);
  CHECK(b_full.blocks == std::vector<int32_t>{0, 1, 2});
  CHECK(b_sliding.blocks == std::vector<int32_t>{-1, -1, 5});
  CHECK(b_sliding.skipped == 2);
  // The hits' tokens are live again (kept in the records while cached): 48 and 16.
  CHECK(full.live_tokens() == 48);
  CHECK(sliding.live_tokens() == 16);
  CHECK(pool.free_count() == 8 - 3 - 1);
  full.check_counts();
  sliding.check_counts();
}

TEST_CASE("Group manager: when a chunk or full attention frees a block next",
          "[memory][group_manager]") {
  BlockPool pool(10, /*block_ids=*/true);
  KvGroupManager chunked = group_manager_of(KvGroup::Kind::kChunked, 32, 0, pool);
  KvGroupManager full = group_manager_of(KvGroup::Kind::kFull, 0, 1, pool);
  KvGroupManager::Table c, f;
  chunked.allocate_new_blocks(c, 40);  // 3 blocks
  full.allocate_new_blocks(f, 40);
  // A chunk of 32: block 0 is freed once the chunk of the computed tokens starts at 16 or later,
  // the chunk from 32: at 32 computed tokens; then blocks 0 and 1 go together.
  CHECK(chunked.next_free_at(c) == 32);
  CHECK(chunked.remove_skipped_blocks(c, 32) == 2);
  // Block 2 (tokens 32-47) next: once the chunk starts at 48 or later, the chunk from 64.
  CHECK(chunked.next_free_at(c) == 64);
  // Full attention frees nothing.
  CHECK(full.next_free_at(f) == std::numeric_limits<int64_t>::max());
}
