// The one block pool of the paged store (block_pool.h; vLLM's BlockPool in
// vllm/v1/core/block_pool.py): the free queue's order, holders, the prefix-key index with its
// copies, and the counted pool. Every figure is derived by hand in the comments.
#include <catch2/catch.hpp>

#include "core/errors.h"
#include "models/memory/block_pool.h"

using namespace kvsim;

TEST_CASE("Block pool: pops in id order, freed blocks join the back, a hit leaves the middle",
          "[memory][block_pool]") {
  BlockPool pool(4, /*block_ids=*/true);
  // Free queue 0 1 2 3 (vLLM's initial order: block id).
  CHECK(pool.free_count() == 4);
  CHECK(pool.pop_free() == 0);
  CHECK(pool.pop_free() == 1);
  CHECK(pool.block(1).ref == 1);  // one holder, no tokens yet
  CHECK(pool.block(1).filled == 0);
  // Freeing 0 puts it behind 2 and 3: queue 2 3 0.
  CHECK(pool.unref(0));
  CHECK(pool.free_count() == 3);
  // A hit on the free block 3 takes it out of the middle: queue 2 0; a second holder of the held
  // block 1 leaves the queue alone.
  CHECK(pool.take(3));
  CHECK_FALSE(pool.take(1));
  CHECK(pool.block(1).ref == 2);
  CHECK(pool.free_count() == 2);
  CHECK(pool.pop_free() == 2);
  CHECK(pool.pop_free() == 0);
  CHECK(pool.free_count() == 0);
  // Block 1 has two holders: the first unref keeps it held, the second frees it.
  CHECK_FALSE(pool.unref(1));
  CHECK(pool.unref(1));
  CHECK(pool.free_count() == 1);
  pool.check_invariants();
  CHECK_THROWS_AS(pool.unref(1), InvariantError);  // no holder left: a double free
}

TEST_CASE("Block pool: a key's copies are found oldest first, popping one evicts only it",
          "[memory][block_pool]") {
  BlockPool pool(3, /*block_ids=*/true);
  const int32_t a = pool.pop_free();  // 0
  const int32_t b = pool.pop_free();  // 1
  pool.index_key(a, 77);
  pool.index_key(b, 77);  // a younger copy (a request recomputed the block)
  CHECK(pool.cached_block(77) == a);
  // Both freed, a first: queue 2 0 1. Popping 2 evicts nothing; popping 0 evicts the older
  // copy, and the key is then found at 1.
  pool.unref(a);
  pool.unref(b);
  CHECK(pool.cached(77));
  CHECK(pool.pop_free() == 2);
  CHECK(pool.cached_block(77) == a);
  CHECK(pool.pop_free() == a);
  CHECK(pool.block(a).key == 0);
  CHECK(pool.cached_block(77) == b);
  CHECK(pool.pop_free() == b);
  CHECK_FALSE(pool.cached(77));
  CHECK(pool.cached_block(77) == -1);
  pool.check_invariants();
}

TEST_CASE("Block pool without block ids only counts", "[memory][block_pool]") {
  BlockPool pool(10, /*block_ids=*/false);
  CHECK_FALSE(pool.block_ids());
  pool.count_out(7);
  pool.count_in(2);
  CHECK(pool.free_count() == 5);  // 10 - 7 + 2
  pool.check_invariants();
  pool.count_out(6);  // one more than free: the check sees it
  CHECK_THROWS_AS(pool.check_invariants(), InvariantError);
}

TEST_CASE("Block pool in any order: a stack, the block freed last popped first, no cache hits",
          "[memory][block_pool]") {
  BlockPool pool(4, /*block_ids=*/true, BlockPool::FreeOrder::kAny);
  // Pushed 3 2 1 0, so the first pops are in id order as the queue's: 0, then 1, then 2.
  CHECK(pool.free_count() == 4);
  CHECK(pool.pop_free() == 0);
  CHECK(pool.pop_free() == 1);
  CHECK(pool.pop_free() == 2);
  CHECK(pool.block(2).ref == 1);
  CHECK(pool.block(2).filled == 0);
  // Freeing 0 then 1: stack 3 0 1, so 1 pops next, then 0, then 3 (a queue would give 3 0 1).
  CHECK(pool.unref(0));
  CHECK(pool.unref(1));
  CHECK(pool.free_count() == 3);
  pool.check_invariants();
  // A second holder of the held block 2 is fine; taking a free block out of the stack is not.
  CHECK_FALSE(pool.take(2));
  CHECK_FALSE(pool.unref(2));
  CHECK_THROWS_AS(pool.take(3), InvariantError);
  CHECK(pool.pop_free() == 1);
  CHECK(pool.pop_free() == 0);
  CHECK(pool.pop_free() == 3);
  CHECK(pool.free_count() == 0);
  CHECK_THROWS_AS(pool.pop_free(), InvariantError);
}
