// Activation peaks: native attention materialises the score matrix, flash does not.
#include <catch2/catch.hpp>

#include <vector>

#include "core/errors.h"
#include "models/catalog.h"
#include "models/memory/activation.h"
#include "models/memory/caching_allocator_store.h"
#include "models/memory/gpu_memory_pool.h"

using namespace kvsim;

TEST_CASE("one 32k prompt's FP16 scores for 32 heads are 68.7 GB", "[memory][activation]") {
  const ModelSpec& m = Catalog::builtin().model("seed-7b-mha");
  const std::vector<BatchChunk> one = {{32768, 32768}};
  CHECK(attention_score_bytes(m, one) == 68'719'476'736);
  CHECK(activation_peak_bytes(m, one, AttentionKind::kNative) > 2 * attention_score_bytes(m, one));
  CHECK(activation_peak_bytes(m, one, AttentionKind::kFlash) < 5'000'000'000);  // ~4.05 GB
  CHECK(parse_attention_kind("flash") == AttentionKind::kFlash);
  CHECK_THROWS_AS(parse_attention_kind("sdpa"), InputError);
}

TEST_CASE("a 32k native prefill on seed-7b-mha OOMs on an A100-80GB; flash fits",
          "[memory][activation]") {
  const Catalog& c = Catalog::builtin();
  const ModelSpec& m = c.model("seed-7b-mha");
  const GpuSpec& g = c.gpu("a100-sxm4-80gb");
  const std::vector<BatchChunk> prefill = {{32768, 32768}};
  for (AttentionKind kind : {AttentionKind::kNative, AttentionKind::kFlash}) {
    PoolOptions o;
    o.attention = kind;
    const KvBudget b = GpuMemoryPool::budget_for(m, g, o);
    auto store = std::make_unique<CachingAllocatorStore>(
        m, CachingStoreOptions{.growth = GrowthPolicy::kConcat,
                               .device_limit_bytes = b.device_bytes_for_torch()});
    GpuMemoryPool pool(m, g, std::move(store), o);
    REQUIRE(pool.allocate_kv(1, 32768, 32768 + 256));  // 16 GiB of KV fits either way
    AllocResult r = pool.reserve_activations(prefill);
    pool.check_invariants();
    if (kind == AttentionKind::kNative) {
      CHECK_FALSE(r.ok);
      CHECK(r.reason == OomReason::kCapacity);
      CHECK(r.wanted_bytes > 2 * 68'719'476'736);
      CHECK(r.driver_free_bytes < r.wanted_bytes);
    } else {
      CHECK(r.ok);
      CHECK(pool.snapshot().activation_bytes > 0);
      pool.release_activations();
      CHECK(pool.snapshot().activation_bytes == 0);
    }
    pool.check_invariants();
  }
}
