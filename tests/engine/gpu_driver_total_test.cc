// The pool follows the driver's total: vLLM multiplies gpu_memory_utilization into
// torch.cuda.mem_get_info()'s total, so a B200's Llama-3-8B pool is sized from the 178.35 GiB
// the driver reports, not the datasheet's "180 GB" read as 10^9 bytes (167.64 GiB).
#include <catch2/catch.hpp>

#include "tests/engine/engine_test_util.h"

using namespace kvsim;

TEST_CASE("A B200's paged pool is sized from the driver's 178.35 GiB", "[engine][gpu]") {
  // The same model and engine on an H100 (79.18 GiB) and a B200: context (0.5 GiB on both),
  // weights, workspace and the profiled activation peak are the same bytes, so the pools differ
  // by 0.9 x (178.35 - 79.18) GiB = 89.253 GiB = 45,697.5 blocks of 2 MiB (16 tokens x 128 KiB),
  // 45,697 or 45,698 after each pool's floor. From a 167.64 GiB B200 it would be 40,762 or so.
  const RunResult r = test::run_yaml(R"(
name: t
model: llama-3-8b
gpu: h100-sxm
workload: {arrivals: {type: fixed, rate: 1}, max_requests: 1, prompt_tokens: 100, output_tokens: 1}
policies:
  - {name: h100}
  - {name: b200, gpu: b200}
)");
  REQUIRE(r.policies.size() == 2);
  const int64_t block = 16 * 131'072;
  const int64_t h100 = r.policies[0].kv_pool_bytes / block;
  const int64_t b200 = r.policies[1].kv_pool_bytes / block;
  CHECK(b200 - h100 >= 45'697);
  CHECK(b200 - h100 <= 45'698);
}
