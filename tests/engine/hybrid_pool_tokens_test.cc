// gpu_layout.kv_pool_tokens_per_gpu for a hybrid model: what vLLM logs as its KV cache size, the
// tokens of max_model_len requests the pool serves at once, not its pages' token slots.
#include <catch2/catch.hpp>

#include "tests/engine/engine_test_util.h"

using namespace kvsim;

TEST_CASE("A hybrid pool's KV tokens are vLLM's GPU KV cache size", "[engine][hybrid]") {
  // Gemma-3-27B (the weights_dtype override, the catalog's own, writes gpu_layout) on an H100,
  // max_model_len 8,192, budget 2,048, blocks of 16: one full group and six sliding groups of 10
  // layers, a block 10 x 16 x 8,192 = 1,310,720 bytes. One 8,192-token request holds
  // (get_max_concurrency_for_kv_cache_config, each spec's max_memory_usage_bytes): full
  // 8,192 / 16 = 512 blocks; each sliding group ceil(min(1,023 + 2,048, 8,192) / 16) + 1 =
  // 192 + 1 = 193; 512 + 6 x 193 = 1,670 blocks. vLLM logs max_model_len x num_blocks (the null
  // block included: the pool's blocks + 1) / 1,670, floored.
  const RunResult r = test::run_yaml(R"(
name: t
model: gemma-3-27b
gpu: h100-sxm
engine: {max_model_len: 8192, max_num_batched_tokens: 2048, chunked_prefill: true,
         weights_dtype: bf16}
workload: {arrivals: {type: fixed, rate: 1}, max_requests: 1, prompt_tokens: 100, output_tokens: 1}
policies: [{name: p}]
)");
  REQUIRE(r.policies.size() == 1);
  REQUIRE(r.policies[0].gpu_layout.has_value());
  const int64_t blocks = r.policies[0].kv_pool_bytes / 1'310'720;
  REQUIRE(blocks * 1'310'720 == r.policies[0].kv_pool_bytes);
  CHECK(r.policies[0].gpu_layout->kv_pool_tokens_per_gpu == (blocks + 1) * 8192 / 1670);
  // The pool's bytes over every layer's bytes a token (62 x 8,192), the figure written before,
  // counts each sliding group's pages as if they held full-length requests' tokens.
  CHECK(r.policies[0].gpu_layout->kv_pool_tokens_per_gpu != blocks * 1'310'720 / 507'904);
}
