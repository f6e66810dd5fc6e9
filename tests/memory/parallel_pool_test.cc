// The pool of one GPU under tensor/pipeline parallelism: Llama-3-70B's
// 131.42 GiB of FP16 weights do not fit one H100-80GB, but a quarter of them does.
#include <catch2/catch.hpp>

#include "core/config_node.h"
#include "core/errors.h"
#include "core/units.h"
#include "models/catalog.h"
#include "models/memory/gpu_memory_pool.h"

using namespace kvsim;

namespace {
ConfigNode paged() {
  return ConfigNode::parse_string("{type: paged, block_size: 16}", "test.yaml");
}
PoolOptions options(int tp, int pp = 1) {
  return PoolOptions{
      .profile_batched_tokens = 8192, .profile_num_seqs = 256, .parallelism = Parallelism{tp, pp}};
}
}  // namespace

TEST_CASE("llama-3-70b is refused on 1 H100 and runs on 4 with the memory split",
          "[memory][parallel]") {
  const Catalog& c = Catalog::builtin();
  const ModelSpec& m = c.model("llama-3-70b");
  const GpuSpec& h100 = c.gpu("h100-sxm");
  CHECK_THROWS_WITH(GpuMemoryPool(m, h100, paged(), options(1)),
                    Catch::Matchers::Contains("131.42 GiB of weights) does not fit"));
  const GpuMemoryPool pool(m, h100, paged(), options(4));
  // Per GPU: 35,278,831,616 bytes of weights (tests/models/parallelism_test.cc), 2 KV heads:
  // 81,920 bytes of KV per token.
  CHECK(pool.budget().weights_bytes == 35'278'831'616);
  CHECK(pool.kv().kv_bytes_per_token() == 81'920);
  CHECK(pool.model().heads == 16);
  // Rough hand check of the pool: 0.9 x 85,018,877,624 (79.18 GiB) = 76.52 GB, less the
  // weights (35.28 GB), context and workspace (2 x 0.54 GB) and the profile's activation peak
  // (~0.94 GB: 8192 tokens at TP 4) leaves ~39.2 GB = ~478k tokens of 81,920 bytes.
  const int64_t tokens = pool.kv().usage().capacity_bytes / pool.kv().kv_bytes_per_token();
  CHECK(tokens > 470'000);
  CHECK(tokens < 490'000);
  // At TP 8, 1 KV head of 40,960 bytes per token and 17.64 GB of weights: ~57.7 GB of pool,
  // ~1.39M tokens, nearly 3x TP 4's.
  const GpuMemoryPool tp8(m, h100, paged(), options(8));
  const int64_t tokens8 = tp8.kv().usage().capacity_bytes / tp8.kv().kv_bytes_per_token();
  CHECK(tokens8 > 1'380'000);
  CHECK(tokens8 < 1'400'000);
  CHECK_THROWS_WITH(GpuMemoryPool(m, h100, paged(), options(3)),
                    Catch::Matchers::Contains("do not split 3 ways"));
}

TEST_CASE("the stage with room for the fewest KV tokens sizes the pool", "[memory][parallel]") {
  const Catalog& c = Catalog::builtin();
  const ModelSpec& m = c.model("llama-3-8b");
  const GpuSpec& a100 = c.gpu("a100-sxm4-80gb");
  // PP 3: stages of 11, 11, 10 layers (436,224,000 bytes each). Stage 0 holds 11 layers + the
  // embedding (1,050,673,152), stage 1 11 layers only, stage 2 10 layers + LM head + final
  // norm. Stages 0 and 1 need 45,056 bytes of KV per token; stage 0 has the most weights, so
  // the least room: 11 x 436,224,000 + 1,050,673,152 = 5,849,137,152 bytes.
  const ModelSpec share = GpuMemoryPool::sizing_share(m, a100, options(1, 3));
  CHECK(share.layers == 11);
  CHECK(share.weights_bytes() == 5'849'137'152);
  CHECK(share.kv_bytes_per_token() == 45'056);
  CHECK(weights_bytes_on_gpu(m, {1, 3}, 2) == 10 * int64_t{436'224'000} + 1'050'673'152 + 8'192);
}
