// Deferred growth of the hybrid store (hybrid_deferred.cc): a window inside a request's last
// block that ends before the first growth freeing a block of a local group, tokens counted in
// usage() when added, and the order the protocol requires. Every figure is derived by hand.
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
