// The paged store under sliding-window attention: blocks wholly before the window are freed as a
// sequence grows (vLLM v1's SlidingWindowManager.remove_skipped_blocks), so held KV per sequence
// is capped at the window rounded to blocks, plus one block.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "models/catalog.h"
#include "models/memory/paged_store.h"

using namespace kvsim;

namespace {
// Mistral-7B-v0.1: 2 x 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 bytes per token; a
// 16-token block is 2,097,152 bytes. Its window is 4,096 tokens.
constexpr int64_t kMistralBpt = 131072;
constexpr int64_t kMistralBlockBytes = 16 * kMistralBpt;

PagedStore mistral_store(int64_t blocks, bool prefix = false) {
  const ModelSpec& m = Catalog::builtin().model("mistral-7b");
  REQUIRE(m.kv_bytes_per_token() == kMistralBpt);
  REQUIRE(m.sliding_window == 4096);
  return PagedStore(m.kv_bytes_per_token(), {.block_tokens = 16,
                                             .num_blocks = blocks,
                                             .enable_prefix_caching = prefix,
                                             .sliding_window = *m.sliding_window});
}
}  // namespace

TEST_CASE("a sliding window caps the KV a sequence holds at the window rounded to blocks, plus one",
          "[memory][paged][window]") {
  // A 10,000-token prompt with up to 500 output tokens on Mistral-7B, 16-token blocks, 1,000
  // blocks in the pool.
  PagedStore s = mistral_store(1000);
  // The prefill computes all 10,000 prompt tokens: 10,000 / 16 = 625 blocks, none freed yet
  // (nothing is computed when they are allocated; the prefill's queries read the whole prompt).
  REQUIRE(s.allocate(1, 10000, 10500));
  CHECK(s.held_blocks(1) == 625);
  CHECK(s.free_blocks() == 375);
  s.check_invariants();

  // First decode step, to 10,001 tokens. The next query (position 10,000) attends to positions
  // 10,000 - 4,096 + 1 = 5,905 onwards, so blocks 0 .. 5,905 / 16 - 1 = 0 .. 368 are never read
  // again: 369 freed. The 10,001st token needs block 625: ceil(10,001 / 16) = 626 blocks in all,
  // 626 - 369 = 257 held = ceil(4,096 / 16) + 1.
  REQUIRE(s.grow(1, 10001));
  CHECK(s.held_blocks(1) == 257);
  CHECK(s.window_freed_blocks() == 369);
  CHECK(s.free_blocks() == 1000 - 257);
  KvUsage u = s.usage();
  // Live: tokens 5,904 .. 10,000, i.e. 10,001 - 369 x 16 = 4,097 tokens x 131,072 = 537,001,984.
  CHECK(u.live_bytes == 537001984);
  // Held: 257 blocks x 2,097,152 = 538,968,064; the last block's other 15 slots are
  // reservation (the request may reach 10,500).
  CHECK(u.held_bytes == 538968064);
  CHECK(u.reservation_bytes == 15 * kMistralBpt);
  CHECK(u.internal_bytes == 0);
  s.check_invariants();

  // Decode to 10,500 one token at a time. Growing from t to t + 1 tokens, t = 16k + r: blocks
  // ceil((t + 1) / 16) = k + 1, freed floor((t - 4,095) / 16) = k - 256 + (r == 15 ? 1 : 0),
  // so 257 held, or 256 when r = 15 (the oldest block left the window and the new token still
  // fits the last block): the same figures as vLLM's per-step remove_skipped_blocks.
  int64_t most = 0, least = 1 << 30;
  for (int64_t t = 10001; t < 10500; ++t) {
    REQUIRE(s.grow(1, t + 1));
    const auto held = s.held_blocks(1);
    most = std::max(most, held);
    least = std::min(least, held);
  }
  CHECK(most == 257);
  CHECK(least == 256);
  // At 10,500 (t = 10,499 = 16 x 656 + 3): 657 blocks, 400 freed, 257 held.
  CHECK(s.held_blocks(1) == 257);
  CHECK(s.window_freed_blocks() == 400);
  CHECK(s.usage().held_bytes == 257 * kMistralBlockBytes);
  // Live: 10,500 - 400 x 16 = 4,100 tokens.
  CHECK(s.usage().live_bytes == 4100 * kMistralBpt);
  s.check_invariants();
  s.release(1);
  CHECK(s.free_blocks() == 1000);
  CHECK(s.usage().live_bytes == 0);
  CHECK(s.usage().held_bytes == 0);
  s.check_invariants();
}

TEST_CASE("without a window the same sequence holds every block", "[memory][paged][window]") {
  // The same request, no window: ceil(10,500 / 16) = 657 blocks, 10,500 live tokens.
  PagedStore s(kMistralBpt, {.block_tokens = 16, .num_blocks = 1000});
  REQUIRE(s.allocate(1, 10000, 10500));
  for (int64_t t = 10000; t < 10500; ++t) REQUIRE(s.grow(1, t + 1));
  CHECK(s.held_blocks(1) == 657);
  CHECK(s.window_freed_blocks() == 0);
  CHECK(s.usage().live_bytes == 10500 * kMistralBpt);
  s.check_invariants();
}

TEST_CASE("a sliding window frees blocks on the deferred-growth path too",
          "[memory][paged][window]") {
  // The engine's decode path: tokens inside the last block are deferred (open/add/settle) and
  // the store is called only when a block fills. 10,000 + 16 tokens fill block 625 exactly;
  // growing to 10,017 computes from 10,016 tokens: first needed 10,016 - 4,095 = 5,921, so
  // 5,921 / 16 = 370 blocks freed; ceil(10,017 / 16) = 627 blocks, 257 held.
  PagedStore s = mistral_store(1000);
  REQUIRE(s.allocate(1, 10000, 10500));
  REQUIRE(s.grow(1, 10001));  // 257 held (above)
  const int64_t room = s.open(1);
  CHECK(room == 15);
  s.add(15);
  s.settle(1, 15);
  CHECK(s.tokens(1) == 10016);
  CHECK(s.held_blocks(1) == 257);  // nothing moves inside a block
  REQUIRE(s.grow(1, 10017));
  CHECK(s.window_freed_blocks() == 370);
  CHECK(s.held_blocks(1) == 257);
  s.check_invariants();
}

TEST_CASE(
    "a growth that fails under a sliding window leaves the store unchanged, and freed "
    "window blocks serve the growth",
    "[memory][paged][window]") {
  // A 4-token window, 4-token blocks, 3 blocks. allocate 12 tokens: 3 blocks, none free.
  // Growing to 13 frees blocks wholly before 12 - 4 + 1 = 9: 9 / 4 = 2 blocks, and needs one:
  // it succeeds from a freed block. 2 held (8 .. 11 and 12).
  PagedStore s(100, {.block_tokens = 4, .num_blocks = 3, .sliding_window = 4});
  REQUIRE(s.allocate(1, 12, 100));
  CHECK(s.free_blocks() == 0);
  REQUIRE(s.grow(1, 13));
  CHECK(s.held_blocks(1) == 2);
  CHECK(s.free_blocks() == 1);
  s.check_invariants();
  // A second request takes the free block; request 1 growing by 9 tokens (to 22) would free
  // blocks before 13 - 4 + 1 = 10: 10 / 4 = 2 in all, none new, and needs ceil(22 / 4) - 4 = 2
  // blocks with 0 free: it fails and nothing changes.
  REQUIRE(s.allocate(2, 4, 4));
  const AllocResult r = s.grow(1, 22);
  CHECK_FALSE(r.ok);
  CHECK(s.tokens(1) == 13);
  CHECK(s.held_blocks(1) == 2);
  CHECK(s.window_freed_blocks() == 2);
  s.check_invariants();
}

TEST_CASE(
    "prefix caching with a sliding window: freed shared blocks stay with their other owner "
    "and cached blocks stay findable",
    "[memory][paged][window][prefix]") {
  // Window 32, 16-token blocks, 20 blocks. Two requests with the same 64-token prompt (hashes
  // per 16 tokens). A: 4 blocks a0..a3. B hits (64 - 1) / 16 = 3 of them (a0..a2) and allocates
  // one: 15 free.
  const std::vector<uint64_t> hashes = {11, 22, 33, 44};
  const PrefixHashes prefix{.hashes = hashes, .block_tokens = 16, .prompt_tokens = 64};
  PagedStore s(
      100,
      {.block_tokens = 16, .num_blocks = 20, .enable_prefix_caching = true, .sliding_window = 32});
  REQUIRE(s.allocate(1, 64, 100, prefix));
  REQUIRE(s.allocate(2, 64, 100, prefix));
  CHECK(s.prefix_hit_blocks() == 3);
  CHECK(s.free_blocks() == 15);
  // A grows to 65: blocks before 64 - 32 + 1 = 33, 33 / 16 = 2 (a0, a1), leave A, but B still
  // holds them; one new block: 14 free, A holds a2, a3, a4.
  REQUIRE(s.grow(1, 65));
  CHECK(s.held_blocks(1) == 3);
  CHECK(s.block_table(1).size() == 3);  // with prefix caching the ids are kept too
  CHECK(s.free_blocks() == 14);
  s.check_invariants();
  // B grows to 65: a0 and a1 are now free (with their keys), one new block: 15 free.
  REQUIRE(s.grow(2, 65));
  CHECK(s.free_blocks() == 15);
  CHECK(s.window_freed_blocks() == 4);
  s.check_invariants();
  // C with the same prompt hits a0, a1 (cached free blocks, back out of the free list) and a2
  // (held): 3 hits, 4 blocks of which 3 come from the free list: 12 free.
  REQUIRE(s.allocate(3, 64, 100, prefix));
  CHECK(s.prefix_hit_blocks() == 6);
  CHECK(s.free_blocks() == 12);
  s.check_invariants();
  s.release(1);
  s.release(2);
  s.release(3);
  CHECK(s.free_blocks() == 20);
  CHECK(s.usage().live_bytes == 0);
  s.check_invariants();
}

TEST_CASE(
    "a long deferral window under a sliding window ends before the first growth that frees "
    "blocks, or swaps a block at each crossing past it; window_frees says how many a growth frees",
    "[memory][paged][window][fast_forward]") {
  // Mistral-7B (window 4,096), 16-token blocks, 1,000 in the pool. A growth to T tokens (from
  // T - 1) frees floor((T - 4,096) / 16) - skipped leading blocks (blocks_to_skip): some once
  // T >= 4,096 + 16 = 4,112 while skipped = 0. Growths reach the store at crossings, T = 1
  // modulo 16, so the first that frees is 4,113, and a long window from 3,000 tokens stops at
  // 4,112 (room 1,112), short of the request's 5,000.
  PagedStore s = mistral_store(1000);
  REQUIRE(s.allocate(1, 3000, 5000));
  CHECK(s.window_frees(1, 4111) == 0);
  CHECK(s.window_frees(1, 4112) == 1);  // (4,112 is inside a block: no growth goes there)
  CHECK(s.window_frees(1, 4113) == 1);
  CHECK(s.open_long(1) == 1112);
  // Under it nothing is freed: its 70 crossings (targets 3,009, 3,025, ..., 4,097) take blocks,
  // token by token as a decode aggregate reports them.
  for (int64_t target = 3001; target <= 4112; ++target) {
    if (target % 16 == 1) {
      s.add_crossings(1);
    } else {
      s.add(1);
    }
  }
  s.settle(1, 1112);
  CHECK(s.held_blocks(1) == 4112 / 16);
  CHECK(s.window_freed_blocks() == 0);
  s.check_invariants();
  // The crossing to 4,113 goes to the store and frees block 0 (tokens 0..15; the next query,
  // position 4,112, reads from 4,112 - 4,095 = 17 on): 258 blocks in all, 257 held.
  CHECK(s.window_frees(1, 4113) == 1);
  REQUIRE(s.grow(1, 4113));
  CHECK(s.window_freed_blocks() == 1);
  CHECK(s.held_blocks(1) == 257);
  // From there every crossing frees one block and takes one (4,129: floor(33 / 16) - 1 = 1; each
  // later one a block further): a swapping window, which runs to the request's end, 5,000
  // (room 887). Up to 4,992 its 54 crossings (4,129 .. 4,977) go to add_swaps, and free blocks
  // stay at 743. (The crossing to 4,993 starts its last block, which ends past 5,000: the engine
  // settles before it and grows as usual.)
  CHECK(s.window_frees(1, 4129) == 1);
  CHECK(s.open_long(1) == 887);
  CHECK(s.long_window_swaps(1));
  for (int64_t target = 4114; target <= 4992; ++target) {
    if (target % 16 == 1) {
      s.add_swaps(1);
    } else {
      s.add(1);
    }
    REQUIRE(s.free_blocks() == 743);
  }
  s.settle(1, 4992 - 4113);
  // As stepping leaves it: the growth to 4,977 (from 4,976) left floor(881 / 16) = 55 blocks
  // freed; ceil(4,992 / 16) - 55 = 257 held; 4,992 - 55 x 16 = 4,112 tokens live.
  CHECK(s.window_freed_blocks() == 55);
  CHECK(s.held_blocks(1) == 257);
  CHECK(s.usage().live_bytes == 4112 * kMistralBpt);
  s.check_invariants();
  // Without a window a long window runs to the request's end.
  PagedStore full(131072, {.block_tokens = 16, .num_blocks = 1000});
  REQUIRE(full.allocate(2, 3000, 5000));
  CHECK(full.window_frees(2, 4113) == 0);
  CHECK(full.open_long(2) == 2000);
}
