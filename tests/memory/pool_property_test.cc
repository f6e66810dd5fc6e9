// Property tests: seeded random allocate/grow/release/activation streams over every store type,
// mirrored in a trivial reference model; after every step the invariants must hold.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "models/memory/paged_store.h"
#include "tests/memory/store_helpers.h"

using namespace kvsim;

namespace {

struct RefRequest {
  int64_t tokens = 0;
  int64_t max_total = 0;
};

int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

void check_against(const GpuMemoryPool& pool, const std::map<RequestId, RefRequest>& ref,
                   bool shared) {
  pool.check_invariants();
  const KvStore& s = pool.kv();
  int64_t tokens = 0;
  for (const auto& [id, r] : ref) {
    REQUIRE(s.holds(id));
    REQUIRE(s.tokens(id) == r.tokens);
    tokens += r.tokens;
  }
  const KvUsage u = s.usage();
  REQUIRE(u.requests == static_cast<int64_t>(ref.size()));
  if (shared) {
    REQUIRE(u.live_bytes <= tokens * s.kv_bytes_per_token());
  } else {
    REQUIRE(u.live_bytes == tokens * s.kv_bytes_per_token());
  }
  if (const PagedBlocks* paged = s.paged()) {  // paged: waste per request below one block
    REQUIRE(u.held_bytes - u.live_bytes <
            std::max<int64_t>(1, u.requests) * paged->block_tokens() * s.kv_bytes_per_token());
  }
  const MemorySnapshot snap = pool.snapshot();
  REQUIRE(snap.category_sum() == snap.capacity_bytes);
  REQUIRE(snap.torch_reserved_bytes >= snap.torch_allocated_bytes);
  REQUIRE(snap.driver_free_bytes <= snap.free_bytes);
}

}  // namespace

TEST_CASE("random KV streams keep every pool invariant", "[memory][property]") {
  const std::string yaml = GENERATE(from_range(test::store_yamls()));
  const int seed = GENERATE(range(0, 200));
  INFO("store " << yaml << " seed " << seed);
  auto pool = test::small_pool(yaml);
  const bool shared = yaml.find("prefix") != std::string::npos;
  std::mt19937_64 rng(static_cast<uint64_t>(seed) * 7919 + 17);
  std::map<RequestId, RefRequest> ref;
  std::map<RequestId, std::vector<uint64_t>> hashes;
  bool activations = false;
  int failures = 0;
  for (int step = 0; step < 120; ++step) {
    const RequestId id = uniform(rng, 0, 11);
    const int64_t op = uniform(rng, 0, 9);
    if (op == 9) {  // activations on or off
      if (activations) {
        pool->release_activations();
      } else {
        AllocResult r = pool->reserve_activations(uniform(rng, 1, int64_t{64} << 20));
        if (!r) ++failures;
      }
      activations = pool->activation_bytes() > 0;
    } else if (!ref.count(id)) {
      const int64_t prompt = uniform(rng, 1, 3000);
      const int64_t max_total = prompt + uniform(rng, 1, 1000);
      auto& h = hashes[id];
      h.clear();
      const int64_t group = uniform(rng, 0, 2);  // requests of a group share a prefix
      for (int64_t j = 0; j * 16 < prompt; ++j) {
        h.push_back(j < 40 ? static_cast<uint64_t>(group * 1000 + j + 1)
                           : static_cast<uint64_t>(id * 1'000'000 + step * 1000 + j + 1));
      }
      AllocResult r = pool->allocate_kv(id, prompt, max_total, {h, 16});
      if (r) {
        ref[id] = {prompt, max_total};
      } else {
        ++failures;
        REQUIRE(r.wanted_bytes > 0);
        REQUIRE_FALSE(pool->kv().holds(id));
      }
    } else if (op < 6) {  // grow by 1..40 tokens, within max_total
      RefRequest& r = ref[id];
      if (r.tokens < r.max_total) {
        const int64_t to = std::min(r.max_total, r.tokens + uniform(rng, 1, 40));
        if (pool->grow_kv(id, to)) {
          r.tokens = to;
        } else {
          ++failures;
        }
      }
    } else {
      pool->release_kv(id);
      ref.erase(id);
    }
    check_against(*pool, ref, shared);
  }
  for (const auto& [id, r] : ref) pool->release_kv(id);
  pool->release_activations();
  ref.clear();
  check_against(*pool, ref, shared);
  const KvUsage end = pool->kv().usage();
  REQUIRE(end.held_bytes == 0);  // no leak
  if (const PagedBlocks* paged = pool->kv().paged()) {
    REQUIRE(paged->free_blocks() == paged->total_blocks());
  }
}
