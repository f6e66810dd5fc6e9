// Prefix caching for hybrid models in the engine: gpt-oss-120b, Gemma-3-27B and Llama-4-Scout
// run with enable_prefix_caching, a repeated prompt hitting in every KV cache group
// (HybridKVCacheCoordinator.find_longest_cache_hit), with every invariant checked at each step.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/engine/engine_test_util.h"

using namespace kvsim;

namespace {

namespace fs = std::filesystem;

// Two requests with the same 2,048-token prompt (4 Mooncake hashes of 512 tokens), one output
// token each, the second arriving 10 s after the first (long after it finished); blocks of 16,
// chunks of 512.
RunResult run_repeat(const std::string& model, const std::string& gpu, int tp) {
  const fs::path trace =
      fs::temp_directory_path() / fmt::format("kvsim-hybrid-apc-{}-{}.jsonl", ::getpid(), model);
  {
    std::ofstream out(trace);
    for (int t : {0, 10'000}) {
      out << fmt::format(
                 R"({{"timestamp": {}, "input_length": 2048, "output_length": 1, "hash_ids": [1, 2, 3, 4]}})",
                 t)
          << "\n";
    }
  }
  const RunResult r = test::run_yaml(fmt::format(R"(
name: t
model: {}
gpu: {}
engine: {{chunked_prefill: true, max_num_batched_tokens: 512, tensor_parallel: {},
         max_model_len: 8192,
         kv: {{type: paged, block_size: 16, num_blocks: 4000, enable_prefix_caching: true}}}}
workload: {{trace: {{path: {}, format: mooncake}}}}
policies: [{{name: p, guards: []}}]
)",
                                                 model, gpu, tp, trace.string()));
  fs::remove(trace);
  return r;
}

}  // namespace

TEST_CASE("Hybrid models run with prefix caching: a repeated prompt hits in every group",
          "[engine][hybrid][prefix]") {
  // The first request's 128 blocks are keyed in every group as its chunks are allocated; blocks
  // that leave a sliding window go back to the pool still keyed, and at its end all of them do.
  // Nothing evicts them (4,000 blocks). The second request looks up at most (2,048 - 1) / 16 =
  // 127 blocks: the full group has all 127; a sliding group (gpt-oss: window 128, a run of
  // ceil(127 / 16) = 8 blocks; Gemma: 1,024, 64 blocks) finds its run ending at block 127; a
  // chunked group (Scout: 8,192) has no chunk start before block 127 and finds blocks 0-126. The
  // hit: 127 x 16 = 2,032 tokens of 2,048 looked up by the two requests (4,096).
  for (const auto& [model, gpu, tp] :
       {std::tuple{"gpt-oss-120b", "h100-sxm", 1}, std::tuple{"gemma-3-27b", "h100-sxm", 1},
        std::tuple{"llama-4-scout", "h200", 2}}) {
    INFO(model);
    const RunResult r = run_repeat(model, gpu, tp);
    REQUIRE(r.policies.size() == 1);
    const PolicySummary& p = r.policies[0];
    CHECK(p.prefix_caching);
    CHECK(test::count(p, Outcome::kCompleted) == 2);
    CHECK(p.prefix_query_tokens == 4'096);
    CHECK(p.prefix_hit_tokens == 2'032);
    CHECK(p.prefix_hit_blocks == 127);
  }
}
