// The paged store's fast paths: the id index, block counting without prefix
// caching, and deferred decode growth. Each is checked against the plain path it replaces.
#include <catch2/catch.hpp>

#include <random>
#include <unordered_map>
#include <vector>

#include "core/errors.h"
#include "models/memory/id_index.h"
#include "models/memory/paged_store.h"

using namespace kvsim;

namespace {

PagedStore make_block16_store(int64_t blocks, bool prefix) {
  return PagedStore(1000,
                    {.block_tokens = 16, .num_blocks = blocks, .enable_prefix_caching = prefix});
}

void same_usage(const KvUsage& a, const KvUsage& b) {
  CHECK(a.live_bytes == b.live_bytes);
  CHECK(a.reservation_bytes == b.reservation_bytes);
  CHECK(a.internal_bytes == b.internal_bytes);
  CHECK(a.held_bytes == b.held_bytes);
  CHECK(a.free_bytes == b.free_bytes);
  CHECK(a.requests == b.requests);
}

}  // namespace

TEST_CASE("id index agrees with a hash map under random inserts and erases", "[memory][paged]") {
  const uint64_t seed = GENERATE(range(0, 20));
  INFO("seed " << seed);
  std::mt19937_64 g(seed);
  IdIndex index;
  std::unordered_map<int64_t, int32_t> ref;
  for (int step = 0; step < 4000; ++step) {
    // Dense ids (as traces give) with a few far ones, so probe runs wrap and collide.
    const int64_t id =
        g() % 8 == 0 ? static_cast<int64_t>(g() >> 1) : static_cast<int64_t>(g() % 300);
    if (g() % 2 == 0 && !ref.count(id)) {
      const auto slot = static_cast<int32_t>(g() % 1000);
      index.insert(id, slot);
      ref[id] = slot;
    } else {
      CHECK(index.erase(id) == (ref.erase(id) == 1));
    }
    REQUIRE(index.size() == ref.size());
    for (int k = 0; k < 8; ++k) {
      const auto probe = static_cast<int64_t>(g() % 300);
      auto it = ref.find(probe);
      CHECK(index.find(probe) == (it == ref.end() ? IdIndex::kNone : it->second));
    }
  }
  for (const auto& [id, slot] : ref) CHECK(index.find(id) == slot);
}

TEST_CASE("without prefix caching the store counts blocks instead of listing them",
          "[memory][paged]") {
  // 10 blocks of 16 tokens.
  PagedStore s = make_block16_store(10, false);
  REQUIRE(s.allocate(1, 33, 100));  // ceil(33 / 16) = 3 blocks: 7 free
  REQUIRE(s.allocate(2, 16, 20));   // 1 block: 6 free
  CHECK(s.held_blocks(1) == 3);
  CHECK(s.held_blocks(2) == 1);
  CHECK(s.free_blocks() == 6);
  REQUIRE(s.grow(1, 48));  // fills its third block: no new one
  CHECK(s.free_blocks() == 6);
  REQUIRE(s.grow(1, 81));  // ceil(81 / 16) = 6 blocks: 3 more, 3 free
  CHECK(s.held_blocks(1) == 6);
  CHECK(s.free_blocks() == 3);
  // 81 + 16 live tokens; request 1's last block: 96 - 81 = 15 slots, all reservation (to 100);
  // request 2's: 0. Held: 7 blocks x 16 = 112 tokens.
  const KvUsage u = s.usage();
  CHECK(u.live_bytes == 97 * 1000);
  CHECK(u.reservation_bytes == 15 * 1000);
  CHECK(u.internal_bytes == 0);
  CHECK(u.held_bytes == 112 * 1000);
  CHECK_FALSE(s.grow(1, 100 + 49));  // ceil(149 / 16) = 10 blocks: 4 more with 3 free
  CHECK(s.held_blocks(1) == 6);
  s.check_invariants();
  // No figure depends on which blocks a request holds, so their ids are not kept.
  CHECK_THROWS_AS(s.block_table(1), InvariantError);
  s.release(1);  // its 6 blocks: 9 free
  CHECK(s.free_blocks() == 9);
  CHECK(s.usage().live_bytes == 16 * 1000);
  s.check_invariants();
}

TEST_CASE("counted blocks give the linked list's figures", "[memory][paged]") {
  // With prefix caching on but no prefix hashes, the store keeps the linked list and nothing is
  // shared: the same calls must give the same block counts and figures as the counting store.
  const uint64_t seed = GENERATE(range(0, 20));
  INFO("seed " << seed);
  std::mt19937_64 g(seed);
  PagedStore counted = make_block16_store(200, false), list = make_block16_store(200, true);
  std::vector<int64_t> held;
  for (int step = 0; step < 600; ++step) {
    const int op = static_cast<int>(g() % 3);
    if (op == 0 || held.empty()) {
      const auto id = static_cast<int64_t>(step);
      const int64_t prompt = 1 + static_cast<int64_t>(g() % 100);
      const bool a = static_cast<bool>(counted.allocate(id, prompt, prompt + 50));
      REQUIRE(a == static_cast<bool>(list.allocate(id, prompt, prompt + 50)));
      if (a) held.push_back(id);
    } else if (op == 1) {
      const int64_t id = held[g() % held.size()];
      const int64_t to = counted.tokens(id) + 1 + static_cast<int64_t>(g() % 40);
      REQUIRE(static_cast<bool>(counted.grow(id, to)) == static_cast<bool>(list.grow(id, to)));
    } else {
      const size_t k = g() % held.size();
      counted.release(held[k]);
      list.release(held[k]);
      held.erase(held.begin() + static_cast<long>(k));
    }
    for (int64_t id : held) {
      REQUIRE(counted.held_blocks(id) == list.held_blocks(id));
      REQUIRE(list.block_table(id).size() == static_cast<size_t>(list.held_blocks(id)));
    }
    REQUIRE(counted.free_blocks() == list.free_blocks());
    same_usage(counted.usage(), list.usage());
    counted.check_invariants();
    list.check_invariants();
  }
}

TEST_CASE("deferred decode growth gives the figures of growing token by token", "[memory][paged]") {
  const bool prefix = GENERATE(false, true);
  const uint64_t seed = GENERATE(range(0, 10));
  INFO("seed " << seed << " prefix " << prefix);
  std::mt19937_64 g(seed);
  PagedStore eager = make_block16_store(400, prefix), lazy = make_block16_store(400, prefix);
  DeferredGrowth* deferral = lazy.deferred_growth();
  REQUIRE(deferral == &lazy);
  // One deferral window per sequence, as the engine keeps them (sim/serving/kv_ledger.h).
  struct Seq {
    int64_t id, tokens, deferred = 0, opened_at = 0, room = 0;
    bool open = false;
  };
  std::vector<Seq> seqs;
  for (int64_t id = 0; id < 12; ++id) {
    const int64_t prompt = 1 + static_cast<int64_t>(g() % 60);
    REQUIRE(eager.allocate(id, prompt, prompt + 200));
    REQUIRE(lazy.allocate(id, prompt, prompt + 200));
    seqs.push_back({.id = id, .tokens = prompt});
  }
  auto settle = [&](Seq& s) {
    if (!s.open) return;
    deferral->settle(s.id, s.deferred);
    s.deferred = 0;
    s.open = false;
  };
  for (int step = 0; step < 150; ++step) {
    int64_t batch = 0;
    for (Seq& s : seqs) {  // one decode step each, as the engine does
      ++s.tokens;
      REQUIRE(eager.grow(s.id, s.tokens));
      // The engine's rule: defer while the open window has room; else settle, grow and reopen.
      if (s.open && s.tokens - s.opened_at <= s.room) {
        ++s.deferred;
        ++batch;
      } else {
        deferral->add(batch);
        batch = 0;
        settle(s);
        REQUIRE(lazy.grow(s.id, s.tokens));
        s.opened_at = lazy.tokens(s.id);
        s.room = deferral->open(s.id);
        s.open = true;
      }
    }
    deferral->add(batch);
    same_usage(eager.usage(), lazy.usage());
    CHECK(eager.free_blocks() == lazy.free_blocks());
    if (step % 10 == 9) {  // settle everything, then the full checks hold
      for (Seq& s : seqs) {
        settle(s);
        CHECK(lazy.tokens(s.id) == eager.tokens(s.id));
      }
      CHECK(deferral->outstanding() == 0);
      lazy.check_invariants();
      same_usage(eager.usage(), lazy.usage());
    }
  }
  for (Seq& s : seqs) {
    settle(s);
    lazy.release(s.id);
    eager.release(s.id);
  }
  same_usage(eager.usage(), lazy.usage());
  lazy.check_invariants();
}

TEST_CASE("a deferral window must be settled before any other call about its request",
          "[memory][paged]") {
  PagedStore s = make_block16_store(40, false);
  DeferredGrowth& d = *s.deferred_growth();
  REQUIRE(s.allocate(1, 10, 100));
  REQUIRE(s.allocate(2, 10, 100));
  CHECK(d.open(1) == 6);  // the slack of its one block
  d.add(3);
  CHECK_THROWS_AS(s.tokens(1), InvariantError);
  CHECK_THROWS_AS(s.grow(1, 20), InvariantError);
  CHECK_THROWS_AS(s.release(1), InvariantError);
  CHECK_THROWS_AS(d.open(1), InvariantError);
  CHECK_THROWS_AS(d.settle(2, 0), InvariantError);  // request 2 has no window open
  CHECK_THROWS_AS(d.settle(1, 7), InvariantError);  // more than its room
  CHECK(s.tokens(2) == 10);                         // other requests are unaffected
  d.settle(1, 3);
  CHECK(s.tokens(1) == 13);
  CHECK(d.outstanding() == 0);
  s.check_invariants();
  s.release(1);
  s.release(2);
}

TEST_CASE("a long window's block crossings, counted in aggregate, give the figures of growing",
          "[memory][paged]") {
  // Request 1 holds 20 tokens (2 blocks of 16) and may reach 60; request 2 the same, grown token
  // by token as the engine's slow path does. Request 1 opens a long window (room 60 - 20 = 40)
  // and takes 20 more tokens: 12 inside its 2nd block (21..32: add), one that starts its 3rd
  // block (33: add_crossings; the block ends at 48 <= 60, so the other 15 slots are
  // reservation), and 7 inside that one (34..40: add). Both stores then hold 40 tokens in
  // 3 blocks: 2 x 3 = 6 of 10 held, live 80, reservation 2 x (48 - 40) = 16, internal 0.
  PagedStore s = make_block16_store(10, false), g = make_block16_store(10, false);
  REQUIRE(s.crossings_in_aggregate());
  for (PagedStore* x : {&s, &g}) {
    REQUIRE(x->allocate(1, 20, 60));
    REQUIRE(x->allocate(2, 20, 60));
  }
  // What a growth would take, asked without making it: up to 32 tokens none (its 2nd block has
  // room), 33-48 one block, 100 tokens ceil(100 / 16) - 2 = 5.
  CHECK(s.blocks_to_grow(1, 32) == 0);
  CHECK(s.blocks_to_grow(1, 33) == 1);
  CHECK(s.blocks_to_grow(1, 100) == 5);
  CHECK(s.free_blocks() == 6);
  CHECK(s.open_long(1) == 40);
  // usage_after() tells the figures of the 20 tokens (one of them a crossing) before they are
  // added: the fast-forward records such states without making them. Live 40 + 20 = 60 tokens,
  // 6 - 1 = 5 blocks free.
  const std::optional<KvUsage> predicted = s.usage_after(20, 1);
  REQUIRE(predicted);
  CHECK(predicted->live_bytes == 60 * 1000);
  CHECK(predicted->free_bytes == 5 * 16 * 1000);
  s.add(12);
  s.add_crossings(1);
  CHECK(s.free_blocks() == 5);  // the crossing's block is taken at once
  s.add(7);
  same_usage(*predicted, s.usage());
  for (int64_t t = 21; t <= 40; ++t) REQUIRE(g.grow(1, t));
  for (PagedStore* x : {&s, &g}) REQUIRE(x->grow(2, 40));
  same_usage(s.usage(), g.usage());
  CHECK(s.usage().live_bytes == 80 * 1000);
  CHECK(s.usage().reservation_bytes == 16 * 1000);
  CHECK(s.outstanding() == 20);
  s.settle(1, 20);  // the request's figures catch up: 40 tokens, its 3rd block attributed
  CHECK(s.held_blocks(1) == 3);
  CHECK(s.tokens(1) == 40);
  s.check_invariants();
  same_usage(s.usage(), g.usage());
  // Its last block (49..64 past max_total 60) is not a crossing in aggregate: the window is
  // settled and the growth made as usual, with 60 - 49 = 11 reservation and 4 internal slots.
  REQUIRE(s.grow(1, 49));
  REQUIRE(g.grow(1, 49));
  same_usage(s.usage(), g.usage());
  CHECK(s.usage().internal_bytes == 4 * 1000);
  // More crossings than free blocks are refused.
  CHECK(s.open_long(2) == 20);
  CHECK_THROWS_AS(s.add_crossings(s.free_blocks() + 1), InvariantError);
}

TEST_CASE("with prefix caching, crossings in aggregate take real blocks and fill them at settle",
          "[memory][paged]") {
  // The same growth as above on stores with block ids: request 1 (20 tokens, max 60) opens a
  // long window and takes 20 more tokens, one of them crossing into its 3rd block. The crossed
  // block leaves the free list at add_crossings (as growing takes it at token 33) and joins
  // request 1's table at settle: 3 blocks, filled 16, 16, 8 (40 tokens), as growing leaves them.
  PagedStore s = make_block16_store(10, true), g = make_block16_store(10, true);
  REQUIRE(s.crossings_in_aggregate());
  for (PagedStore* x : {&s, &g}) {
    REQUIRE(x->allocate(1, 20, 60));
    REQUIRE(x->allocate(2, 20, 60));
  }
  CHECK(s.open_long(1) == 40);
  s.add(12);
  s.add_crossings(1);
  CHECK(s.free_blocks() == 5);
  s.add(7);
  for (int64_t t = 21; t <= 40; ++t) REQUIRE(g.grow(1, t));
  same_usage(s.usage(), g.usage());
  s.settle(1, 20);
  s.check_invariants();  // every block's fill and owner count agree with the totals
  CHECK(s.block_table(1).size() == 3);
  CHECK(s.held_blocks(1) == 3);
  same_usage(s.usage(), g.usage());
  // Growth and release go on as from growing: the last, partial block, then both released.
  for (PagedStore* x : {&s, &g}) {
    REQUIRE(x->grow(1, 49));
    REQUIRE(x->grow(2, 40));
  }
  same_usage(s.usage(), g.usage());
  for (PagedStore* x : {&s, &g}) {
    x->release(1);
    x->release(2);
    x->check_invariants();
  }
  same_usage(s.usage(), g.usage());
  CHECK(s.free_blocks() == 10);
}
