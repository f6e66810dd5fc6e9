// Unit tests of the paged store (vLLM block pool).
#include <catch2/catch.hpp>

#include "core/errors.h"
#include "models/memory/paged_store.h"

using namespace kvsim;

namespace {
constexpr int64_t kBpt = 1000;  // bytes per token, round for reading
PagedStore make(int64_t blocks, bool prefix = false) {
  return PagedStore(kBpt,
                    {.block_tokens = 16, .num_blocks = blocks, .enable_prefix_caching = prefix});
}
}  // namespace

TEST_CASE("paged pool returns every block on release", "[memory][paged]") {
  PagedStore s = make(100);
  REQUIRE(s.allocate(1, 33, 100));  // 3 blocks
  REQUIRE(s.allocate(2, 16, 16));   // 1 block
  CHECK(s.free_blocks() == 96);
  CHECK(s.held_blocks(1) == 3);
  s.check_invariants();
  s.release(1);
  s.release(2);
  CHECK(s.free_blocks() == 100);
  CHECK(s.usage().held_bytes == 0);
  s.check_invariants();
}

TEST_CASE("paged waste is the slack of the last block", "[memory][paged]") {
  PagedStore s = make(100);
  REQUIRE(
      s.allocate(1, 33, 40));  // 3 blocks = 48 slots, 33 live, 7 reservation (to 40), 8 internal
  KvUsage u = s.usage();
  CHECK(u.live_bytes == 33 * kBpt);
  CHECK(u.reservation_bytes == 7 * kBpt);
  CHECK(u.internal_bytes == 8 * kBpt);
  CHECK(u.held_bytes == 48 * kBpt);
  CHECK(u.external_bytes == 0);
  CHECK(s.tokens_until_growth_allocates(1) == 15);
  REQUIRE(s.grow(1, 48));
  CHECK(s.tokens_until_growth_allocates(1) == 0);
  CHECK(s.free_blocks() == 97);
  REQUIRE(s.grow(1, 49));
  CHECK(s.free_blocks() == 96);
  CHECK(s.tokens_until_growth_allocates(1) == 15);
  s.check_invariants();
}

TEST_CASE("paged out of blocks is a returned result that leaves the store unchanged",
          "[memory][paged]") {
  PagedStore s = make(4);
  REQUIRE(s.allocate(1, 48, 100));
  AllocResult r = s.allocate(2, 32, 40);
  CHECK_FALSE(r.ok);
  CHECK(r.reason == OomReason::kCapacity);
  CHECK(r.wanted_bytes == 2 * 16 * kBpt);
  CHECK(r.store_free_bytes == 16 * kBpt);
  CHECK_FALSE(s.holds(2));
  REQUIRE(s.grow(1, 64));
  AllocResult g = s.grow(1, 65);
  CHECK_FALSE(g.ok);
  CHECK(s.tokens(1) == 64);
  CHECK_THAT(g.message(), Catch::Matchers::Contains("out of memory (capacity)"));
  s.check_invariants();
}

TEST_CASE("paged prefix sharing counts shared blocks once and ref-counts them", "[memory][paged]") {
  PagedStore s = make(100, true);
  const std::vector<uint64_t> a = {11, 22, 33};  // 3 hash blocks of 16 tokens
  const std::vector<uint64_t> b = {11, 22, 99};
  REQUIRE(s.allocate(1, 48, 60, {a, 16}));
  REQUIRE(s.allocate(2, 48, 60, {b, 16}));
  CHECK(s.prefix_hit_blocks() == 2);
  CHECK(s.free_blocks() == 100 - 4);
  CHECK(s.usage().live_bytes == 64 * kBpt);  // 3 + 1 blocks of 16 tokens, shared counted once
  s.check_invariants();
  s.release(1);
  CHECK(s.free_blocks() == 100 - 3);  // the shared two stay with request 2
  s.release(2);
  CHECK(s.free_blocks() == 100);
  // A freed keyed block is still found (cache hit on a free block) until it is reused.
  REQUIRE(s.allocate(3, 40, 60, {a, 16}));
  CHECK(s.prefix_hit_blocks() == 4);
  s.check_invariants();
}

// Blocks of 16 tokens, hashes per 16 tokens. A 48-token prompt {11, 22, 33}
// keys its 3 full blocks. A lookup for a sequence of n tokens counts at most (n - 1) / 16 whole
// blocks (the last token is always computed, vLLM's max_cache_hit_length = num_tokens - 1):
// 48 tokens -> 47 / 16 = 2 blocks = 32 tokens; 49 tokens (the prompt plus one generated token,
// a recompute) -> 3 blocks = 48 tokens; the same prompt again is allocated with 2 shared blocks
// and 1 fresh one (100 - 3 - 1 = 96 free).
TEST_CASE("paged prefix lookup leaves the last token to compute", "[memory][paged]") {
  PagedStore s = make(100, true);
  const std::vector<uint64_t> a = {11, 22, 33};
  const PrefixHashes pa{a, 16, 48};
  CHECK(s.prefix_caching());
  CHECK(s.cached_prefix_tokens(pa, 48) == 0);
  REQUIRE(s.allocate(1, 48, 60, pa));
  CHECK(s.cached_prefix_tokens(pa, 48) == 32);
  CHECK(s.cached_prefix_tokens(pa, 49) == 48);
  CHECK(s.cached_prefix_tokens(pa, 1) == 0);
  REQUIRE(s.allocate(2, 48, 60, pa));
  CHECK(s.prefix_hit_blocks() == 2);
  CHECK(s.free_blocks() == 96);
  s.check_invariants();
  // Without prefix caching nothing is ever cached.
  PagedStore off = make(100);
  REQUIRE(off.allocate(1, 48, 60, pa));
  CHECK_FALSE(off.prefix_caching());
  CHECK(off.cached_prefix_tokens(pa, 49) == 0);
}

// A chunked prefill allocates its prompt chunk by chunk: a block is keyed (findable) once the
// tokens allocated fill it, and only inside the prompt (prompt_tokens = 48: blocks 0..2).
//   allocate 24 tokens: block 0 full, block 1 half -> 16 cached tokens;
//   grow to 40: block 1 full -> 32; grow to 48: block 2 full -> 48 for a 49-token lookup;
//   grow to 64 (decode tokens): block 3 is past the prompt, never keyed -> still 48 for 65.
TEST_CASE("paged prefix blocks are keyed as a chunked prefill fills them", "[memory][paged]") {
  PagedStore s = make(100, true);
  const std::vector<uint64_t> b = {7, 8, 9, 10};  // a hash past the prompt: ignored
  const PrefixHashes pb{b, 16, 48};
  REQUIRE(s.allocate(3, 24, 80, pb));
  CHECK(s.cached_prefix_tokens(pb, 49) == 16);
  REQUIRE(s.grow(3, 40));
  CHECK(s.cached_prefix_tokens(pb, 49) == 32);
  REQUIRE(s.grow(3, 48));
  CHECK(s.cached_prefix_tokens(pb, 49) == 48);
  REQUIRE(s.grow(3, 64));
  CHECK(s.cached_prefix_tokens(PrefixHashes{b, 16, 64}, 65) == 48);
  s.check_invariants();
  // Freed, the blocks stay cached until they are reused.
  s.release(3);
  CHECK(s.cached_prefix_tokens(pb, 49) == 48);
  s.check_invariants();
}

// A request's own blocks (PrefixHashes::owner): full blocks past its hashes (generated tokens,
// the block that straddles the prompt's end) are cached under keys of its own, so that it hits
// them again after a preemption (vLLM hashes every full block); no other request can.
//   request 5: 40-token prompt, hashes cover 32 (two blocks keyed by the hashes). grow to 48:
//   block 2 (tokens 32..47: 8 prompt + 8 generated) is full, keyed as its own; grow to 50, then
//   14 tokens through a deferral window (the engine's decode fast path): block 3 fills, keyed
//   when the window is settled; grow to 70: block 4 (64..69) is partial, never keyed. Released
//   (preempted), it looks its 70 tokens up: at most (70 - 1) / 16 = 4 blocks -> 64 tokens.
//   Request 6, with the same hashes but its own id, hits only the two hashed blocks: 32.
TEST_CASE("paged own blocks: a request re-hits its generated blocks, no one else does",
          "[memory][paged]") {
  PagedStore s = make(100, true);
  const std::vector<uint64_t> h = {41};  // one 32-token hash chunk
  PrefixHashes p5{h, 32, 40};
  p5.owner = 5;
  REQUIRE(s.allocate(5, 40, 80, p5));
  REQUIRE(s.grow(5, 48));
  CHECK(s.cached_prefix_tokens(p5, 49) == 48);
  REQUIRE(s.grow(5, 50));
  DeferredGrowth& d = *s.deferred_growth();
  REQUIRE(d.open(5) == 14);
  d.add(14);
  CHECK(s.cached_prefix_tokens(p5, 65) == 48);  // not settled yet
  d.settle(5, 14);
  CHECK(s.cached_prefix_tokens(p5, 65) == 64);
  REQUIRE(s.grow(5, 70));
  CHECK(s.tokens(5) == 70);
  s.check_invariants();
  s.release(5);
  CHECK(s.cached_prefix_tokens(p5, 70) == 64);
  PrefixHashes p6{h, 32, 40};
  p6.owner = 6;
  CHECK(s.cached_prefix_tokens(p6, 70) == 32);
  // The resumed request shares those 4 blocks and allocates 1 for the rest.
  const int64_t free_before = s.free_blocks();
  CHECK(s.blocks_to_allocate(p5, 70) == 5);  // 5 blocks; the 4 hits sit on the free list
  REQUIRE(s.allocate(5, 70, 80, p5));
  CHECK(s.prefix_hit_blocks() == 4);
  CHECK(s.free_blocks() == free_before - 5);
  s.check_invariants();
}

TEST_CASE("paged misuse is an invariant error, not silent corruption", "[memory][paged]") {
  PagedStore s = make(10);
  REQUIRE(s.allocate(1, 10, 20));
  CHECK_THROWS_AS(s.allocate(1, 10, 20), InvariantError);
  s.release(1);
  CHECK_THROWS_AS(s.release(1), InvariantError);
}
