// Unit tests of the contiguous arena store.
#include <catch2/catch.hpp>

#include "models/memory/contiguous_store.h"

using namespace kvsim;

namespace {
constexpr int64_t kArenaBpt = 100;
ContiguousStore make(int64_t arena_tokens, ReservePolicy p, FitPolicy f = FitPolicy::kFirst,
                     int64_t max_len = 1000) {
  return ContiguousStore(
      kArenaBpt,
      {.arena_bytes = arena_tokens * kArenaBpt, .reserve = p, .fit = f, .max_len = max_len});
}
}  // namespace

TEST_CASE("contiguous max_len reserves max_len and refuses longer requests",
          "[memory][contiguous]") {
  ContiguousStore s = make(10'000, ReservePolicy::kMaxLen);
  REQUIRE(s.allocate(1, 100, 300));
  KvUsage u = s.usage();
  CHECK(u.held_bytes == 1000 * kArenaBpt);
  CHECK(u.live_bytes == 100 * kArenaBpt);
  CHECK(u.reservation_bytes == 200 * kArenaBpt);
  CHECK(u.internal_bytes == 700 * kArenaBpt);
  AllocResult r = s.allocate(2, 900, 1200);
  CHECK(r.reason == OomReason::kTooLong);
  CHECK(s.tokens_until_growth_allocates(1) == 900);
  s.check_invariants();
}

TEST_CASE("contiguous pow2 and prompt_plus_max_new size regions", "[memory][contiguous]") {
  ContiguousStore p2 = make(10'000, ReservePolicy::kPow2);
  REQUIRE(p2.allocate(1, 20, 25));
  CHECK(p2.usage().held_bytes == 32 * kArenaBpt);
  ContiguousStore oracle = make(10'000, ReservePolicy::kPromptPlusMaxNew);
  REQUIRE(oracle.allocate(1, 20, 25));
  CHECK(oracle.usage().held_bytes == 25 * kArenaBpt);
  CHECK(oracle.usage().internal_bytes == 0);
}

TEST_CASE("contiguous external fragmentation emerges from holes", "[memory][contiguous]") {
  // 10 regions of 100 fill the arena; free every other one: 500 free, largest hole 100.
  ContiguousStore s = make(1000, ReservePolicy::kPromptPlusMaxNew);
  for (int i = 0; i < 10; ++i) REQUIRE(s.allocate(i, 50, 100));
  for (int i = 0; i < 10; i += 2) s.release(i);
  CHECK(s.free_bytes() == 500 * kArenaBpt);
  CHECK(s.largest_hole_bytes() == 100 * kArenaBpt);
  AllocResult r = s.allocate(100, 150, 200);
  CHECK_FALSE(r.ok);
  CHECK(r.reason == OomReason::kFragmentation);
  CHECK(r.largest_free_bytes == 100 * kArenaBpt);
  // The last attempt wanted 200 tokens: all five 100-token holes are unusable for it.
  CHECK(s.usage().external_bytes == 500 * kArenaBpt);
  s.check_invariants();
}

TEST_CASE("contiguous first fit and best fit choose different holes", "[memory][contiguous]") {
  for (FitPolicy f : {FitPolicy::kFirst, FitPolicy::kBest}) {
    ContiguousStore s = make(1000, ReservePolicy::kPromptPlusMaxNew, f);
    REQUIRE(s.allocate(1, 300, 300));  // [0,300)
    REQUIRE(s.allocate(2, 100, 100));  // [300,400)
    REQUIRE(s.allocate(3, 100, 100));  // [400,500)
    REQUIRE(s.allocate(4, 500, 500));  // [500,1000)
    s.release(1);                      // hole of 300 at 0
    s.release(3);                      // hole of 100 at 400
    REQUIRE(s.allocate(5, 100, 100));
    // First fit takes the hole at 0 (leaving 200 + 100); best fit the exact 100 (leaving 300).
    CHECK(s.largest_hole_bytes() == (f == FitPolicy::kFirst ? 200 : 300) * kArenaBpt);
    s.check_invariants();
  }
}

TEST_CASE("contiguous exact growth extends in place or moves", "[memory][contiguous]") {
  ContiguousStore s = make(1000, ReservePolicy::kExact);
  REQUIRE(s.allocate(1, 100, 500));
  REQUIRE(s.allocate(2, 100, 500));  // right behind 1: 1 cannot extend in place
  CHECK(s.tokens_until_growth_allocates(1) == 0);
  REQUIRE(s.grow(2, 150));  // extends into the tail hole
  REQUIRE(s.grow(1, 101));  // moves past 2
  CHECK(s.usage().held_bytes == 251 * kArenaBpt);
  CHECK(s.hole_count() == 2);
  s.check_invariants();
}
