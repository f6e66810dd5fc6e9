// Deferred growth of the hybrid store (hybrid_deferred.cc): a window inside a request's last
// block, or a long one with its block crossings counted in aggregate, that ends before the first
// growth freeing a block of a local group, tokens counted in usage() when added, and the order
// the protocol requires. Every figure is derived by hand.
#include <catch2/catch.hpp>

#include "core/errors.h"
#include "models/memory/kv_groups.h"
#include "models/memory/paged_store.h"
#include "tests/memory/tiny_hybrid.h"

using namespace kvsim;

namespace {

// Full layers {1, 3} (group 0) and a 32-token window on {0, 2} (group 1), 16 bytes a layer and
// token: 32 bytes a token in each group, 64 in all; blocks of 16 tokens, 20 blocks.
PagedStore hybrid_deferred_store() {
  return PagedStore(kv_group_layout(test::tiny_hybrid(ModelSpec::LocalKind::kSlidingWindow, 32)),
                    16, 20);
}

}  // namespace

TEST_CASE("Hybrid deferred growth: the last block's room, counted when added",
          "[memory][hybrid][deferred]") {
  PagedStore s = hybrid_deferred_store();
  DeferredGrowth& d = *s.deferred_growth();
  REQUIRE(s.allocate(1, 20, 100));  // 2 blocks a group
  CHECK(s.free_blocks() == 16);
  // Live 20 x 64 = 1,280 bytes; reservation (32 - 20) x 64 = 768.
  CHECK(s.usage().live_bytes == 1'280);
  CHECK(s.usage().reservation_bytes == 768);
  // Room: the last block's 12 slots (the window frees its first block only at 16 + 32 - 1 = 47
  // computed tokens).
  CHECK(d.open(1) == 12);
  CHECK_THROWS_AS(s.tokens(1), InvariantError);  // settle first
  d.add(5);
  CHECK(d.outstanding() == 5);
  // 5 tokens more live in both groups: 1,280 + 320 = 1,600; reservation 768 - 320 = 448.
  CHECK(s.usage().live_bytes == 1'600);
  CHECK(s.usage().reservation_bytes == 448);
  CHECK(d.usage_after(3, 0)->live_bytes == 1'600 + 3 * 64);
  d.settle(1, 5);
  CHECK(d.outstanding() == 0);
  CHECK(s.tokens(1) == 25);
  CHECK(s.usage().live_bytes == 1'600);
  CHECK(s.usage().reservation_bytes == 448);
  CHECK(s.free_blocks() == 16);
  s.check_invariants();
}

TEST_CASE("Hybrid deferred growth: a window ends before a growth that frees a block",
          "[memory][hybrid][deferred]") {
  PagedStore s = hybrid_deferred_store();
  DeferredGrowth& d = *s.deferred_growth();
  REQUIRE(s.allocate(2, 45, 100));  // 3 blocks a group
  CHECK(s.free_blocks() == 14);
  // The last block ends at 48, but a growth with 47 computed tokens frees the window's first
  // block ((47 - 32 + 1) / 16 = 1; with 46, 15 / 16 = 0): the room is 47 - 45 = 2.
  CHECK(d.open(2) == 2);
  d.add(2);
  d.settle(2, 2);
  CHECK(s.tokens(2) == 47);
  CHECK(s.free_blocks() == 14);  // nothing freed inside the window
  // The growth to 48 frees it, as stepping's would, and needs no new block.
  CHECK(s.window_frees(2, 48) == 1);
  REQUIRE(s.grow(2, 48));
  CHECK(s.free_blocks() == 15);
  CHECK(s.groups()->held_blocks(2, 1) == 2);
  // Its last block is full: no room until it crosses into a new one.
  CHECK(d.open(2) == 0);
  d.settle(2, 0);
  s.check_invariants();
}

TEST_CASE("Hybrid long windows: crossings in aggregate take a block a group, frees stay due",
          "[memory][hybrid][deferred]") {
  // The closed form of a decode stretch per group, for a request of 20 tokens (max_total 100):
  // group 0 (full) crosses into a new block at targets 33, 49, 65, ... (1 modulo 16) and never
  // frees; group 1 (window 32) crosses at the same targets and, from target 48 on, frees its
  // oldest block at each growth whose computed tokens reach 16 s + 32 - 1 (targets 48, 64, 80:
  // 0 modulo 16, one token before each crossing). A long window runs to just before the next
  // free: from 20, targets 21..47 (27 steps: 1 crossing, 0 frees); the growth to 48 is due.
  PagedStore s = hybrid_deferred_store();
  DeferredGrowth& d = *s.deferred_growth();
  REQUIRE(d.crossings_in_aggregate());
  REQUIRE(s.allocate(1, 20, 100));  // 2 blocks a group: 16 free
  REQUIRE(s.free_blocks() == 16);
  CHECK(d.open_long(1) == 27);
  const std::optional<KvUsage> expected = d.usage_after(27, 1);
  d.add(12);           // targets 21..32
  d.add_crossings(1);  // target 33: a block in each group
  d.add(14);           // targets 34..47
  CHECK(s.free_blocks() == 14);
  CHECK(s.groups()->group(0).held_blocks() == 3);
  CHECK(s.groups()->group(1).held_blocks() == 3);
  // 47 tokens live in both groups (47 x 64 = 3,008 bytes), 1 slot of reservation left in each
  // group's third block (64 bytes), 6 blocks of 16 x 32 bytes held (3,072).
  const KvUsage u = s.usage();
  CHECK(u.live_bytes == 3'008);
  CHECK(u.reservation_bytes == 64);
  CHECK(u.held_bytes == 3'072);
  CHECK(u.free_bytes == 14 * 512);
  CHECK(expected->live_bytes == u.live_bytes);
  CHECK(expected->held_bytes == u.held_bytes);
  CHECK(expected->reservation_bytes == u.reservation_bytes);
  d.settle(1, 27);
  CHECK(s.tokens(1) == 47);
  CHECK(s.groups()->held_blocks(1, 0) == 3);
  CHECK(s.groups()->held_blocks(1, 1) == 3);
  CHECK(s.groups()->group(1).live_tokens() == 47);
  s.check_invariants();
  // The due growth to 48 frees group 1's first block (47 computed: (47 - 31) / 16 = 1).
  REQUIRE(s.grow(1, 48));
  CHECK(s.free_blocks() == 15);
  CHECK(s.groups()->held_blocks(1, 1) == 2);
  CHECK(s.groups()->group(1).live_tokens() == 32);
  // The steady period: from 48, targets 49..63 (15 steps: 1 crossing, 0 frees), then the growth
  // to 64 frees one (63 computed: (63 - 31) / 16 = 2).
  CHECK(d.open_long(1) == 15);
  d.add_crossings(1);  // target 49
  d.add(14);           // targets 50..63
  CHECK(s.free_blocks() == 13);
  d.settle(1, 15);
  CHECK(s.groups()->held_blocks(1, 0) == 4);
  CHECK(s.groups()->held_blocks(1, 1) == 3);
  s.check_invariants();
  REQUIRE(s.grow(1, 64));
  CHECK(s.free_blocks() == 14);
  CHECK(s.groups()->held_blocks(1, 1) == 2);
  s.check_invariants();
}

TEST_CASE("Hybrid long windows: a crossing needs a free block in every group",
          "[memory][hybrid][deferred]") {
  // 20 blocks; a 128-token request takes 8 a group (16), leaving 4; another of 16 tokens takes
  // 1 a group, leaving 2: one crossing (2 blocks) fits, two (4) do not.
  PagedStore s = hybrid_deferred_store();
  DeferredGrowth& d = *s.deferred_growth();
  REQUIRE(s.allocate(1, 128, 200));
  REQUIRE(s.allocate(2, 16, 200));
  REQUIRE(s.free_blocks() == 2);
  // Request 2 (16 tokens, its block full) crosses at 17; its window's first free comes at 47
  // computed tokens (block 0 leaves the 32-token window): the room is 47 - 16 = 31.
  CHECK(d.open_long(2) == 31);
  CHECK_THROWS_AS(d.add_crossings(2), InvariantError);
  d.add_crossings(1);
  CHECK(s.free_blocks() == 0);
  d.settle(2, 1);
  CHECK(s.tokens(2) == 17);
  s.check_invariants();
}
