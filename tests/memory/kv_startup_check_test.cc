// vLLM's start-up arithmetic for one request of max_model_len (models/memory/kv_startup_check.h):
// the blocks it holds in each KV cache group, vLLM's refusal and its hint, and the "GPU KV cache
// size" vLLM logs. Every figure by hand.
#include <catch2/catch.hpp>

#include "models/catalog.h"
#include "models/memory/kv_groups.h"
#include "models/memory/kv_startup_check.h"

using namespace kvsim;

namespace {

KvGroupLayout layout_of(const char* model) {
  return kv_group_layout(Catalog::builtin().model(model));
}

}  // namespace

TEST_CASE("One max_model_len request's blocks, group by group", "[memory][startup]") {
  // Llama-3-8B (full attention, 32 layers in one group): ceil(131,072 / 16) = 8,192 blocks of
  // 16 x 131,072 B = 2 MiB: 16 GiB.
  const KvRequestLimits llama{
      .block_tokens = 16, .max_model_len = 131072, .max_num_batched_tokens = 2048};
  CHECK(kv_blocks_for_one_request(layout_of("llama-3-8b"), llama) == 8192);
  CHECK(kv_bytes_for_one_request(layout_of("llama-3-8b"), llama) == int64_t{16} << 30);
  // Mistral-7B (every layer a 4,096 window) at 32,768: ceil(min(4,095 + 2,048, 32,768) / 16) + 1
  // = 384 + 1 = 385 (SlidingWindowSpec.max_memory_usage_bytes).
  CHECK(kv_blocks_for_one_request(
            layout_of("mistral-7b"),
            {.block_tokens = 16, .max_model_len = 32768, .max_num_batched_tokens = 2048}) == 385);
  // Gemma-3-27B at 8,192 (1 full + 6 sliding groups of 10, window 1,024): 512 + 6 x
  // (ceil(min(1,023 + 2,048, 8,192) / 16) + 1) = 512 + 6 x 193 = 1,670.
  CHECK(kv_blocks_for_one_request(
            layout_of("gemma-3-27b"),
            {.block_tokens = 16, .max_model_len = 8192, .max_num_batched_tokens = 2048}) == 1670);
  // Llama-4-Scout at 131,072 (1 full + 3 chunked groups of 12, chunks of 8,192): 8,192 + 3 x
  // ceil(min(8,192 + 2,048, 131,072) / 16) = 8,192 + 3 x 640 = 10,112
  // (ChunkedLocalAttentionSpec.max_memory_usage_bytes).
  CHECK(kv_blocks_for_one_request(layout_of("llama-4-scout"), llama) == 10112);
}

TEST_CASE("vLLM's refusal and its hint: the longest max_model_len that fits", "[memory][startup]") {
  const KvGroupLayout l = layout_of("llama-3-8b");
  const KvRequestLimits limits{
      .block_tokens = 16, .max_model_len = 131072, .max_num_batched_tokens = 2048};
  // 1,000 blocks of 2 MiB and one byte: 16,000 tokens fit (1,000 whole blocks), 16,001 need a
  // 1,001st.
  const int64_t available = 1000 * (int64_t{2} << 20) + 1;
  CHECK(estimate_max_model_len(l, limits, available) == 16000);
  const auto error = one_request_fits_error(l, limits, available);
  REQUIRE(error.has_value());
  CHECK_THAT(*error, Catch::Contains("max_model_len 131072 needs 16.00 GiB of KV cache for one "
                                     "request, more than the 1.95 GiB available"));
  CHECK_THAT(*error, Catch::Contains("estimated maximum model length is 16000"));
  // Exactly enough: no refusal (vLLM raises only when needed > available).
  CHECK_FALSE(one_request_fits_error(l, limits, int64_t{16} << 30).has_value());
  // Not one block: no hint.
  CHECK(estimate_max_model_len(l, limits, 100) == 0);
  CHECK_THAT(*one_request_fits_error(l, limits, 100), !Catch::Contains("estimated"));
}

TEST_CASE("The KV cache size vLLM logs: max_model_len x blocks / one request's blocks",
          "[memory][startup]") {
  // Gemma-3-27B at 8,192, budget 2,048: 1,670 blocks a request. A pool of 10,000 blocks (the
  // null block included) serves 10,000 / 1,670 = 5.988 such requests: 49,053 tokens
  // (floor of 10,000 x 8,192 / 1,670 = 81,920,000 / 1,670 = 49,053.9).
  CHECK(vllm_kv_cache_size_tokens(
            layout_of("gemma-3-27b"),
            {.block_tokens = 16, .max_model_len = 8192, .max_num_batched_tokens = 2048},
            10000) == 49053);
  // Full attention: max_model_len x blocks / ceil(len / 16) = every slot when 16 divides it.
  CHECK(vllm_kv_cache_size_tokens(
            layout_of("llama-3-8b"),
            {.block_tokens = 16, .max_model_len = 8192, .max_num_batched_tokens = 2048},
            10000) == 160000);
}
