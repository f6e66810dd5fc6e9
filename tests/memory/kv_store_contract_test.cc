// The contract every KV store honours, run over every store type and configuration.
#include <catch2/catch.hpp>

#include "tests/memory/store_helpers.h"

using namespace kvsim;

TEST_CASE("every KV store honours the KvStore contract", "[memory][contract]") {
  const std::string yaml = GENERATE(from_range(test::store_yamls()));
  INFO("store " << yaml);
  auto pool = test::small_pool(yaml);
  KvStore& s = pool->kv();
  const int64_t bpt = s.kv_bytes_per_token();
  CHECK(bpt == 131072);
  CHECK(s.usage().held_bytes == 0);
  const MemorySnapshot empty = pool->snapshot();

  // Allocate: live is exactly the prompt, held covers it, the identity holds.
  REQUIRE(pool->allocate_kv(7, 100, 300));
  CHECK(s.holds(7));
  CHECK(s.tokens(7) == 100);
  KvUsage u = s.usage();
  CHECK(u.live_bytes == 100 * bpt);
  CHECK(u.held_bytes >= u.live_bytes);
  CHECK(u.live_bytes + u.internal_bytes + u.reservation_bytes == u.held_bytes);
  CHECK(u.requests == 1);
  pool->check_invariants();

  // Grow by one token at a time through the slack, then past it.
  const int64_t slack = s.tokens_until_growth_allocates(7);
  CHECK(slack >= 0);
  const int64_t held_before = u.held_bytes;
  for (int64_t i = 1; i <= slack; ++i) REQUIRE(pool->grow_kv(7, 100 + i));
  CHECK(s.usage().held_bytes == held_before);  // growth inside the slack allocates nothing
  if (101 + slack <= 300) {  // past the slack, within max_total (max_len stores cannot go further)
    REQUIRE(pool->grow_kv(7, 101 + slack));
    CHECK(s.tokens(7) == 101 + slack);
    CHECK(s.usage().live_bytes == (101 + slack) * bpt);
  }
  pool->check_invariants();

  // A request that can never fit fails as a result, and changes nothing.
  const KvUsage before = s.usage();
  AllocResult r = pool->allocate_kv(8, 4'000'000, 4'000'000);
  CHECK_FALSE(r.ok);
  CHECK(r.reason != OomReason::kNone);
  CHECK(r.wanted_bytes > 0);
  CHECK(r.torch_reserved_bytes >= r.torch_allocated_bytes);
  CHECK_FALSE(s.holds(8));
  CHECK(s.usage().live_bytes == before.live_bytes);
  CHECK(s.usage().held_bytes == before.held_bytes);
  pool->check_invariants();

  // Release returns everything the request held.
  pool->release_kv(7);
  CHECK_FALSE(s.holds(7));
  CHECK(s.usage().held_bytes == 0);
  CHECK(s.usage().live_bytes == 0);
  const MemorySnapshot after = pool->snapshot();
  CHECK(after.category_sum() == after.capacity_bytes);
  CHECK(after.kv_live_bytes + after.kv_waste_bytes == 0);
  CHECK(after.torch_allocated_bytes == empty.torch_allocated_bytes);
  pool->check_invariants();
}

TEST_CASE("pool categories sum to capacity and category_at finds each byte", "[memory][contract]") {
  const std::string yaml = GENERATE(from_range(test::store_yamls()));
  INFO("store " << yaml);
  auto pool = test::small_pool(yaml);
  REQUIRE(pool->allocate_kv(1, 500, 600));
  REQUIRE(pool->reserve_activations(int64_t{3} << 20));
  const MemorySnapshot s = pool->snapshot();
  s.check();
  CHECK(s.category_at(0) == MemCategory::kContext);
  CHECK(s.category_at(s.context_bytes) == MemCategory::kWeights);
  CHECK(s.category_at(s.context_bytes + s.weights_bytes + s.workspace_bytes) ==
        MemCategory::kActivations);
  CHECK(s.category_at(s.capacity_bytes - 1) == MemCategory::kFree);
  CHECK(s.activation_bytes >= (int64_t{3} << 20));
  CHECK(s.driver_free_bytes ==
        s.capacity_bytes - s.context_bytes - s.workspace_bytes - s.torch_reserved_bytes);
  pool->release_activations();
  pool->check_invariants();
}
