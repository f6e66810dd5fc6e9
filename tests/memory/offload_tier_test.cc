// The CPU tier's LRU manager, call for call against vLLM's LRUOffloadingManager
// (vllm/v1/kv_offload/lru_manager.py): lookups stop at the first block not stored or not ready,
// touch makes the first key the most recent, prepare_store evicts the least recently used
// unpinned ready blocks and changes nothing when it cannot make room.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "models/memory/offload/offload_tier.h"

using namespace kvsim;
using Keys = std::vector<uint64_t>;

namespace {

// Stores `keys` and completes the store (the blocks become ready).
void store(OffloadTier& t, const Keys& keys) {
  auto plan = t.prepare_store(keys);
  REQUIRE(plan.has_value());
  t.complete_store(plan->to_store);
}

}  // namespace

// Capacity 3. Stored 1, 2, 3 in that order: LRU order 1, 2, 3. touch({2, 3}) walks 3 then 2, so
// 2 is the most recent: order 1, 3, 2. Storing {4, 5} needs 2 slots with none free: the two
// least recent, 1 then 3, go. Order 2, 4, 5; a lookup of {2, 4, 5} hits all three, one of
// {1, 2} hits none (1 is gone: a prefix, not a set).
TEST_CASE("the tier evicts in LRU order, touch making the first key the most recent",
          "[memory][offload]") {
  OffloadTier t(3);
  store(t, {1, 2, 3});
  CHECK(t.lru_order() == Keys{1, 2, 3});
  t.touch(Keys{2, 3});
  CHECK(t.lru_order() == Keys{1, 3, 2});
  auto plan = t.prepare_store(Keys{4, 5});
  REQUIRE(plan.has_value());
  CHECK(plan->to_store == Keys{4, 5});
  CHECK(plan->evicted == Keys{1, 3});
  t.complete_store(plan->to_store);
  CHECK(t.lru_order() == Keys{2, 4, 5});
  CHECK(t.lookup(Keys{2, 4, 5}) == 3);
  CHECK(t.lookup(Keys{1, 2}) == 0);
  CHECK(t.stored_blocks() == 5);
  CHECK(t.evicted_blocks() == 2);
  CHECK(t.occupied_blocks() == 3);
  t.check_invariants();
}

// A block being stored is not found and not evicted; a pinned (loading) one is not evicted.
// Capacity 2: 7 ready and pinned, 8 stored but not complete. Storing 9 finds nothing to evict:
// nullopt, and the tier is unchanged. Once 7's load completes, 7 is evicted for 9.
TEST_CASE("pinned and pending blocks are never evicted", "[memory][offload]") {
  OffloadTier t(2);
  store(t, {7});
  auto pending = t.prepare_store(Keys{8});
  REQUIRE(pending.has_value());
  CHECK(t.lookup(Keys{8}) == 0);  // not ready yet
  t.prepare_load(Keys{7});
  CHECK_FALSE(t.prepare_store(Keys{9}).has_value());
  CHECK(t.lru_order() == Keys{7, 8});
  t.complete_load(Keys{7});
  auto plan = t.prepare_store(Keys{9, 8});  // 8 is already there: only 9 is stored
  REQUIRE(plan.has_value());
  CHECK(plan->to_store == Keys{9});
  CHECK(plan->evicted == Keys{7});
  t.check_invariants();
}
