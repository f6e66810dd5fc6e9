// The KV store contract, run over every entry of the KV store registry: a store registered in
// register_kv_stores() gets this whole suite without anyone editing it.
// How it fails: a store that leaks a block on release (usage not back to zero), changes state on
// a failed allocation, breaks its own invariants, or declares capabilities it does not have (or
// lacks ones it has) fails the CHECK that says which.
#include <catch2/catch.hpp>

#include "models/memory/kv_capabilities.h"
#include "models/memory/kv_store_registry.h"
#include "tests/memory/store_helpers.h"

using namespace kvsim;

TEST_CASE("every registered KV store round-trips, fails cleanly and declares what it provides",
          "[contract][memory]") {
  const auto& entries = kv_store_registry().entries();
  REQUIRE(entries.size() >= 3);
  for (const auto& entry : entries) {
    INFO("KV store " << entry.name);
    auto pool = test::small_pool("{type: " + entry.name + "}");
    KvStore& s = pool->kv();

    // Allocate, grow, release: usage back to zero, invariants hold throughout.
    REQUIRE(pool->allocate_kv(1, 100, 300));
    REQUIRE(pool->allocate_kv(2, 50, 60));
    REQUIRE(pool->grow_kv(1, 140));
    REQUIRE(pool->grow_kv(2, 51));
    CHECK(s.tokens(1) == 140);
    CHECK(s.usage().requests == 2);
    pool->check_invariants();
    pool->release_kv(1);
    pool->release_kv(2);
    CHECK(s.usage().held_bytes == 0);
    CHECK(s.usage().live_bytes == 0);
    CHECK(s.usage().requests == 0);
    pool->check_invariants();

    // An allocation that cannot fit is a failed AllocResult that changes nothing.
    REQUIRE(pool->allocate_kv(3, 10, 20));
    const KvUsage before = s.usage();
    const AllocResult r = pool->allocate_kv(4, 4'000'000, 4'000'000);
    CHECK_FALSE(r.ok);
    CHECK(r.reason != OomReason::kNone);
    CHECK_FALSE(s.holds(4));
    CHECK(s.usage().held_bytes == before.held_bytes);
    CHECK(s.usage().live_bytes == before.live_bytes);
    CHECK(s.usage().requests == before.requests);
    pool->check_invariants();
    pool->release_kv(3);
    CHECK(s.usage().held_bytes == 0);

    // The declared capabilities are exactly the store's capability views.
    const KvCapabilities caps = entry.make.provides;
    INFO("declared: " << kv_capability_list(caps)
                      << "; views: " << kv_capability_list(capabilities_of(s)));
    CHECK(caps == capabilities_of(s));
    if (const PagedBlocks* blocks = s.paged()) {
      CHECK(blocks->block_tokens() > 0);
      CHECK(blocks->free_blocks() == blocks->total_blocks());  // everything released above
    }
  }
}
