// The offload tier's ARC policy, call for call against vLLM's ARCOffloadingManager
// (vllm/v1/kv_offload/arc_manager.py), and the reuse tracker of its store gating
// (vllm/v1/kv_offload/reuse_manager.py: BlockReuseTracker).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "models/memory/offload/offload_tier.h"
#include "models/memory/offload/reuse_tracker.h"

using namespace kvsim;
using ArcKeys = std::vector<uint64_t>;

namespace {

// Stores `keys`, completes the store; returns the keys evicted for them.
ArcKeys arc_store(OffloadTier& t, const ArcKeys& keys) {
  auto plan = t.prepare_store(keys);
  REQUIRE(plan.has_value());
  t.complete_store(plan->to_store);
  return plan->evicted;
}

}  // namespace

// Capacity 2, target 0 at first.
//   store 1, 2             T1 = [1, 2]
//   touch 1                1 is ready in T1: it moves to T2. T1 = [2], T2 = [1]
//   store 3                |T1| = 1 >= floor(0): T1's LRU, 2, goes to ghost B1. T1 = [3]
//   touch 2                a B1 ghost: target += max(1, |B2| / |B1| = 0) = 1
//   store 4                |T1| = 1 >= floor(1): 3 goes (B1 = [2, 3]). T1 = [4], T2 = [1]
//   touch 4                T1 = [], T2 = [1, 4]
//   store 5                |T1| = 0 < 1: T2's LRU, 1, goes to B2. T1 = [5], T2 = [4]
//   touch 1                a B2 ghost: target -= max(1, |B1| / |B2| = 2 / 1) = 2, floored at 0
// LRU on the same calls would have evicted 2, then 1 (touched before 3), then 3.
TEST_CASE("the ARC tier adapts between recency and frequency as vLLM's", "[memory][offload]") {
  OffloadTier t(2, OffloadEviction::kArc);
  CHECK(arc_store(t, {1, 2}).empty());
  t.touch(ArcKeys{1});
  CHECK(t.lru_order() == ArcKeys{2});
  CHECK(t.arc_t2() == ArcKeys{1});
  CHECK(arc_store(t, {3}) == ArcKeys{2});
  CHECK(t.arc_b1() == ArcKeys{2});
  t.touch(ArcKeys{2});
  CHECK(t.arc_target_t1() == 1.0);
  CHECK(arc_store(t, {4}) == ArcKeys{3});
  CHECK(t.arc_b1() == ArcKeys{2, 3});
  t.touch(ArcKeys{4});
  CHECK(t.lru_order().empty());
  CHECK(t.arc_t2() == ArcKeys{1, 4});
  CHECK(arc_store(t, {5}) == ArcKeys{1});
  CHECK(t.arc_b2() == ArcKeys{1});
  CHECK(t.lru_order() == ArcKeys{5});
  CHECK(t.arc_t2() == ArcKeys{4});
  t.touch(ArcKeys{1});
  CHECK(t.arc_target_t1() == 0.0);
  CHECK(t.lookup(ArcKeys{4}) == 1);
  CHECK(t.lookup(ArcKeys{1}) == 0);
  CHECK(t.stored_blocks() - t.evicted_blocks() == t.occupied_blocks());
  t.check_invariants();
  // The same calls on the LRU tier: 2, then 1, then 3.
  OffloadTier lru(2);
  arc_store(lru, {1, 2});
  lru.touch(ArcKeys{1});
  CHECK(arc_store(lru, {3}) == ArcKeys{2});
  lru.touch(ArcKeys{2});
  CHECK(arc_store(lru, {4}) == ArcKeys{1});
  lru.touch(ArcKeys{4});
  CHECK(arc_store(lru, {5}) == ArcKeys{3});
}

// A block being stored stays in T1 when touched (not a second use), is not evicted, and T1's
// eviction falls through to T2 when T1 has nothing evictable; a store that cannot make room
// changes nothing. A re-stored ghost leaves its ghost list; the ghosts hold at most the capacity.
TEST_CASE("the ARC tier skips pending and pinned blocks and bounds its ghosts",
          "[memory][offload]") {
  OffloadTier t(2, OffloadEviction::kArc);
  arc_store(t, {1});
  t.touch(ArcKeys{1});                         // T2 = [1]
  auto pending = t.prepare_store(ArcKeys{2});  // T1 = [2], not ready
  REQUIRE(pending.has_value());
  t.touch(ArcKeys{2});
  CHECK(t.lru_order() == ArcKeys{2});  // still T1
  t.prepare_load(ArcKeys{1});          // 1 pinned: nothing evictable
  CHECK_FALSE(t.prepare_store(ArcKeys{3}).has_value());
  t.complete_load(ArcKeys{1});
  // T1's 2 is pending, so the eviction takes T2's 1.
  auto plan = t.prepare_store(ArcKeys{3});
  REQUIRE(plan.has_value());
  CHECK(plan->evicted == ArcKeys{1});
  t.complete_store(pending->to_store);
  t.complete_store(plan->to_store);
  CHECK(t.arc_b2() == ArcKeys{1});
  // Storing 1 again takes it out of B2. T1 = [2, 3]: 2 (T1's LRU) goes to B1.
  CHECK(arc_store(t, {1}) == ArcKeys{2});
  CHECK(t.arc_b2().empty());
  CHECK(t.arc_b1() == ArcKeys{2});
  // Three more evictions from T1: B1 keeps the 2 most recent.
  arc_store(t, {7});
  arc_store(t, {8});
  arc_store(t, {9});
  CHECK(t.arc_b1().size() == 2);
  t.check_invariants();
}

// Threshold 2, room for 3 keys: a key is eligible once recorded twice; the least recently
// recorded key is forgotten when a fourth arrives.
TEST_CASE("the reuse tracker counts lookups in a bounded LRU table", "[memory][offload]") {
  ReuseTracker r(2, 3);
  r.record(ArcKeys{10, 11, 12});
  CHECK_FALSE(r.eligible(10));
  r.record(10);
  CHECK(r.eligible(10));
  CHECK(r.count(10) == 2);
  r.record(13);  // forgets 11, the least recently recorded
  CHECK(r.count(11) == 0);
  CHECK(r.count(12) == 1);
  r.record(11);
  CHECK_FALSE(r.eligible(11));  // counted again from 1
  CHECK(r.count(12) == 0);      // forgotten for 11
}
