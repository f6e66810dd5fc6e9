// Prefix caching in the hybrid store (hybrid_coordinator.h): the longest prefix every group serves
// (vLLM's HybridKVCacheCoordinator.find_longest_cache_hit), a sliding group needing only the
// blocks inside its window; blocks freed outside the window go back to the pool still cached;
// generated tokens are cached under the request's own keys. Every figure is derived by hand.
#include <catch2/catch.hpp>

#include <vector>

#include "models/memory/kv_groups.h"
#include "models/memory/paged_store.h"
#include "tests/memory/tiny_hybrid.h"

using namespace kvsim;

namespace {

const std::vector<uint64_t> kApcHashes = {11, 12, 13, 14};  // one a 16-token block

// Groups full {1, 3} (group 0) and sliding {0, 2} (group 1) over 32 tokens, blocks of 16 tokens,
// 20 blocks. A hit in the sliding group needs ceil((32 - 1) / 16) = 2 contiguous blocks.
PagedStore sliding_store(bool prefix_caching) {
  return PagedStore(kv_group_layout(test::tiny_hybrid(ModelSpec::LocalKind::kSlidingWindow, 32)),
                    16, 20, prefix_caching);
}

PrefixHashes apc_prompt(int64_t tokens, int64_t owner = -1) {
  return {.hashes = kApcHashes, .block_tokens = 16, .prompt_tokens = tokens, .owner = owner};
}

}  // namespace

TEST_CASE("Hybrid prefix cache: a hit every group serves, the sliding group only its window",
          "[memory][hybrid][prefix]") {
  PagedStore s = sliding_store(true);
  // A: 64 prompt tokens, 4 hashed blocks in each group: 8 blocks, all keyed (ids 0-3 full,
  // 4-7 sliding, popped from the front of the free list).
  REQUIRE(s.allocate(1, 64, 100, apc_prompt(64)));
  CHECK(s.free_blocks() == 12);
  // B, the same 64-token prompt while A holds it: at most (64 - 1) / 16 = 3 blocks. Full group:
  // blocks 0-2 cached. Sliding group, right to left: blocks 2 and 1 cached, a run of 2: the hit
  // ends at block 3. 48 tokens.
  CHECK(s.cached_prefix_tokens(apc_prompt(64), 64) == 48);
  // Its allocation: the full group shares 3 held blocks and takes 1; the sliding group's window
  // at 48 computed tokens skips floor((48 - 31) / 16) = 1 block (left null), shares blocks 1-2
  // and takes 1. 2 free blocks.
  CHECK(s.blocks_to_allocate(apc_prompt(64), 64) == 2);
  REQUIRE(s.allocate(2, 64, 100, apc_prompt(64)));
  CHECK(s.free_blocks() == 10);
  CHECK(s.prefix_hit_blocks() == 3);
  CHECK(s.groups()->block_table(2, 1)[0] == -1);
  CHECK(s.groups()->block_table(2, 1)[1] == s.groups()->block_table(1, 1)[1]);
  CHECK(s.held_blocks(2) == 4 + 3);
  // Shared blocks count once: the pool holds A's 8 and B's 2 new ones.
  CHECK(s.usage().held_bytes == 10 * s.block_bytes());
  s.check_invariants();
  // A prompt that leaves the hashes after block 1 (hashes 11, 12, then others): full group 2
  // blocks; the sliding group's run of blocks 0-1 reaches block 0: 2 blocks, 32 tokens.
  const std::vector<uint64_t> other = {11, 12, 99, 98};
  const PrefixHashes diverging{.hashes = other, .block_tokens = 16, .prompt_tokens = 64};
  CHECK(s.cached_prefix_tokens(diverging, 64) == 32);
}

TEST_CASE("Hybrid prefix cache: blocks a window frees go back cached; lost ones end the hit",
          "[memory][hybrid][prefix]") {
  PagedStore s = sliding_store(true);
  // A: 64 prompt tokens (ids 0-3 full, 4-7 sliding; free list 8-19), then to 65: the 64 computed
  // tokens skip 64 - 31 = 33 tokens, 2 whole sliding blocks (ids 5 then 4, newest first, to the
  // back of the free list, keyed), and each group takes a block (8, 9). Free: 10-19, 5, 4.
  REQUIRE(s.allocate(1, 64, 100, apc_prompt(64)));
  REQUIRE(s.grow(1, 65));
  CHECK(s.window_freed_blocks() == 2);
  CHECK(s.free_blocks() == 12);
  CHECK(s.groups()->block_table(1, 1)[0] == -1);
  CHECK(s.groups()->block_table(1, 1)[1] == -1);
  // B, the same prompt: full group 3 blocks; sliding group blocks 2 (held by A) and 1 (freed,
  // still cached): hit 3 blocks. Its sliding window skips block 0 and takes block 1 back off the
  // free list: free blocks taken 1 (full) + 1 (sliding, new) + 1 (sliding, the cached hit) = 3.
  CHECK(s.cached_prefix_tokens(apc_prompt(64), 64) == 48);
  CHECK(s.blocks_to_allocate(apc_prompt(64), 64) == 3);
  // C: 96 tokens without hashes take 6 blocks in each group, 12: every free block, the cached 5
  // and 4 last: evicted.
  REQUIRE(s.allocate(3, 96, 100, {}));
  CHECK(s.free_blocks() == 0);
  s.release(3);
  // Now the full group still has blocks 0-2 cached (A holds them), the sliding group only block
  // 2: no run of 2 from the right, and block 0 is missing: the sliding group serves 0 blocks,
  // and so the hit is 0 (the fixed point: full attention is cut to the sliding group's 0).
  CHECK(s.cached_prefix_tokens(apc_prompt(64), 64) == 0);
  s.check_invariants();
}

TEST_CASE("Hybrid prefix cache: generated tokens are cached under the request's own keys",
          "[memory][hybrid][prefix]") {
  PagedStore s = sliding_store(true);
  // Request 5: a 20-token prompt without hashes, generating to 48 tokens: blocks 0-2 are full of
  // its own tokens and keyed as its own in both groups (at 47 computed the sliding group frees
  // floor((47 - 31) / 16) = 1 block, still cached).
  const PrefixHashes own{.owner = 5};
  REQUIRE(s.allocate(5, 20, 100, own));
  for (int64_t t = 21; t <= 48; ++t) REQUIRE(s.grow(5, t));
  CHECK(s.window_freed_blocks() == 1);
  s.release(5);
  CHECK(s.free_blocks() == 20);
  // Its recompute after a preemption: 49 tokens, at most 3 blocks: full group 0-2; sliding group
  // blocks 2 and 1 (a run of 2): 48 tokens. Another request finds nothing.
  CHECK(s.cached_prefix_tokens(own, 49) == 48);
  CHECK(s.cached_prefix_tokens(PrefixHashes{.owner = 6}, 49) == 0);
  // Without prefix caching nothing is ever found.
  PagedStore off = sliding_store(false);
  REQUIRE(off.allocate(5, 48, 100, own));
  off.release(5);
  CHECK(off.cached_prefix_tokens(own, 49) == 0);
  CHECK_FALSE(off.prefix_caching());
}

TEST_CASE("Hybrid prefix cache: a chunked group looks up only its current chunk",
          "[memory][hybrid][prefix]") {
  // Groups full {1, 3} (group 0) and chunked {0, 2} (group 1), chunks of 32 tokens (2 blocks).
  PagedStore s(kv_group_layout(test::tiny_hybrid(ModelSpec::LocalKind::kChunked, 32)), 16, 20,
               /*prefix_caching=*/true);
  // A: 64 prompt tokens, 4 hashed blocks keyed in each group (ids 0-3 full, 4-7 chunked). To 65:
  // 64 computed tokens open a chunk at 64, so the chunked group frees blocks 0-3 (ids 7, 6, 5, 4
  // to the back, still keyed); each group takes a block (8, 9). Free: 10-19, 7, 6, 5, 4.
  REQUIRE(s.allocate(1, 64, 100, apc_prompt(64)));
  REQUIRE(s.grow(1, 65));
  CHECK(s.window_freed_blocks() == 4);
  CHECK(s.free_blocks() == 14);
  // B: 56 tokens, at most 3 blocks: full 3; chunked, the chunk of 48 tokens starts at block 2:
  // blocks 0-1 count without a lookup, block 2 (freed, cached) is found: 3 blocks, 48 tokens.
  CHECK(s.cached_prefix_tokens(apc_prompt(56), 56) == 48);
  // C: 112 tokens without hashes take 7 blocks in each group, every free block: the cached
  // chunked blocks are evicted.
  REQUIRE(s.allocate(3, 112, 200, {}));
  s.release(3);
  // B again: the chunked group's block 2 is gone: 2 blocks; at 2 the chunk starts at block 2,
  // nothing to look up: 2 blocks, 32 tokens.
  CHECK(s.cached_prefix_tokens(apc_prompt(56), 56) == 32);
  // 72 tokens, at most 4 blocks (the 4 hashes): full 4 (A holds them); chunked, the chunk of 64
  // starts at block 4: all 4 without a lookup, though none is cached. 64 tokens; it takes one
  // new block in each group (the chunked hits are all before its chunk: null).
  CHECK(s.cached_prefix_tokens(apc_prompt(72), 72) == 64);
  CHECK(s.blocks_to_allocate(apc_prompt(72), 72) == 2);
  REQUIRE(s.allocate(2, 72, 100, apc_prompt(72)));
  CHECK(s.groups()->held_blocks(2, 0) == 5);
  CHECK(s.groups()->held_blocks(2, 1) == 1);
  s.check_invariants();
}
