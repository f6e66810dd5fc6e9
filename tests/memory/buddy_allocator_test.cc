// Unit tests of the binary buddy allocator behind `fit: buddy` (the vLLM paper's Orca baselines).
#include <catch2/catch.hpp>

#include "models/memory/buddy_allocator.h"
#include "models/memory/contiguous_store.h"

using namespace kvsim;

// OPT-13B's 12 GiB of KV on an A100-40GB is 12 x 2^30 / 819,200 = 15,728.6 token slots (the
// paper's Table 1: 15.7K); the buddy allocator manages the 15,728 whole ones.
constexpr int64_t kOptSlots = 15'728;

TEST_CASE("a buddy space that is not a power of two starts as its binary decomposition",
          "[memory][buddy]") {
  // 15,728 = 8192 + 4096 + 2048 + 1024 + 256 + 64 + 32 + 16 (0b11110101110000).
  BuddyAllocator b(kOptSlots);
  CHECK(b.free_units() == kOptSlots);
  CHECK(b.largest_free_block() == 8192);
  CHECK(b.free_units_below(2048) == 1024 + 256 + 64 + 32 + 16);  // 1,392
  b.check_invariants();
}

TEST_CASE("buddy blocks round up to powers of two, split lowest-first and merge back",
          "[memory][buddy]") {
  CHECK(BuddyAllocator::block_units(1) == 1);
  CHECK(BuddyAllocator::block_units(25) == 32);
  CHECK(BuddyAllocator::block_units(300) == 512);
  CHECK(BuddyAllocator::block_units(2048) == 2048);
  BuddyAllocator b(kOptSlots);
  // Seven 2,048-slot blocks: the 2048 root (at 12,288) first, then the 4096 root split in two
  // (8,192 and 10,240), then the 8192 root split into four (0, 2,048, 4,096, 6,144).
  std::vector<int64_t> got;
  for (int i = 0; i < 7; ++i) got.push_back(b.allocate(2048));
  CHECK(got == std::vector<int64_t>{12'288, 8'192, 10'240, 0, 2'048, 4'096, 6'144});
  // An eighth does not fit: 15,728 - 7 x 2,048 = 1,392 slots are free, in blocks of at most 1,024.
  CHECK(b.allocate(2048) == -1);
  CHECK(b.free_units() == 1'392);
  CHECK(b.largest_free_block() == 1'024);
  CHECK(b.free_units_below(2048) == 1'392);
  b.check_invariants();
  for (int64_t a : got) b.release(a, 2048);
  CHECK(b.free_units() == kOptSlots);
  CHECK(b.largest_free_block() == 8192);  // merged back into the roots
  b.check_invariants();
  // 300 slots take a 512 block: the 16 root is too small, the 1024 root splits.
  CHECK(b.allocate(300) == 14'336);
  CHECK(b.free_units() == kOptSlots - 512);
  b.check_invariants();
}

TEST_CASE("contiguous fit: buddy counts the block's tail as rounding inside internal",
          "[memory][contiguous][buddy]") {
  constexpr int64_t bpt = 100;
  ContiguousStore oracle(bpt, {.arena_bytes = kOptSlots * bpt,
                               .reserve = ReservePolicy::kPromptPlusMaxNew,
                               .fit = FitPolicy::kBuddy});
  // Prompt 100, 200 new tokens: reservation 300, buddy block 512. Live 100, reservation 200,
  // internal 212 = 512 - 300, all of it the allocator's rounding.
  REQUIRE(oracle.allocate(1, 100, 300));
  KvUsage u = oracle.usage();
  CHECK(u.held_bytes == 512 * bpt);
  CHECK(u.live_bytes == 100 * bpt);
  CHECK(u.reservation_bytes == 200 * bpt);
  CHECK(u.internal_bytes == 212 * bpt);
  CHECK(u.rounding_bytes == 212 * bpt);
  CHECK(u.free_bytes == (kOptSlots - 512) * bpt);
  oracle.check_invariants();

  ContiguousStore pow2(bpt, {.arena_bytes = kOptSlots * bpt,
                             .reserve = ReservePolicy::kPromptPlusPow2New,
                             .fit = FitPolicy::kBuddy});
  // The paper's Pow2: prompt 100 + 25 new tokens reserves 100 + 32 = 132, in a 256 block.
  // Internal 131 = 256 - 125: 7 over-reserved tokens (132 - 125) and 124 of rounding (256 - 132).
  REQUIRE(pow2.allocate(2, 100, 125));
  u = pow2.usage();
  CHECK(u.held_bytes == 256 * bpt);
  CHECK(u.reservation_bytes == 25 * bpt);
  CHECK(u.internal_bytes == 131 * bpt);
  CHECK(u.rounding_bytes == 124 * bpt);
  CHECK(pow2.tokens_until_growth_allocates(2) == 32);
  for (int i = 0; i < 32; ++i) REQUIRE(pow2.grow(2, 101 + i));
  // Past the reservation (133 tokens) the request stays in its 256 block: no move, no new block.
  REQUIRE(pow2.grow(2, 133));
  CHECK(pow2.usage().held_bytes == 256 * bpt);
  pow2.release(2);
  CHECK(pow2.free_bytes() == kOptSlots * bpt);
  pow2.check_invariants();
}
