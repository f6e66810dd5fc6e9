// vLLM's full-sequence admission gate for hybrid models: each sliding-window or chunked group's
// share of a waiting request's reservation is capped at the most that group ever holds at once
// (vllm/v1/core/kv_cache_manager.py, KVCacheManager.allocate_slots with full_sequence_must_fit;
// single_type_kv_cache_manager.py, get_num_blocks_to_allocate with apply_admission_cap=True;
// kv_cache_interface.py, max_admission_blocks_per_request).
#include <cmath>

#include <catch2/catch.hpp>

#include "tests/engine/engine_test_util.h"

using namespace kvsim;

namespace {

// One request of `prompt` tokens and one output token on `model` over `tp` GPUs, a pool of
// `blocks` blocks of 16 tokens, chunks of 512.
RunResult one_long_prompt(const std::string& model, const std::string& gpu, int tp, int64_t prompt,
                          int64_t blocks) {
  return test::run_yaml(fmt::format(R"(
name: t
model: {}
gpu: {}
engine: {{chunked_prefill: true, max_num_batched_tokens: 512, tensor_parallel: {},
         kv: {{type: paged, block_size: 16, num_blocks: {}}}}}
workload: {{arrivals: {{type: fixed, rate: 1}}, max_requests: 1, prompt_tokens: {},
           output_tokens: 1}}
policies: [{{name: p, guards: []}}]
)",
                                    model, gpu, tp, blocks, prompt));
}

int64_t peak_blocks(const PolicySummary& p, int64_t blocks) {
  return std::llround(p.kv_pool_peak_occupancy * static_cast<double>(blocks));
}

}  // namespace

TEST_CASE("The gate caps each local group at what it ever holds, and admits a long prompt",
          "[engine][hybrid]") {
  // Each model runs with a pool of exactly the gate's blocks (admitted), a roomier one (the same
  // peak) and one block fewer than the gate (never).
  // Gemma-3-27B: groups 1 full (10 layers) and 6 sliding, window 1,024. A
  // 5,000-token prompt is ceil(5,000 / 16) = 313 blocks a table; uncapped the gate would ask
  // 7 x 313 = 2,191 > 1,000. The cap of a sliding group: ceil(min(1,024 - 1 + 512, 5,000) / 16)
  // + 1 = ceil(1,535 / 16) + 1 = 96 + 1 = 97. The gate asks 313 + 6 x 97 = 895 (so a pool of
  // 1,000 admits it, where the uncapped count rejected it as too long).
  // Peak, by allocate_slots: before each chunk the sliding tables free the blocks wholly before
  // computed - 1,024 + 1 (remove_skipped_blocks), then every table grows to ceil((computed +
  // chunk) / 16). computed 0: 32 each, 7 x 32 = 224; 512: 7 x 64 = 448; 1,024 (skip 1 token,
  // no block): 7 x 96 = 672; 1,536 (skip 513 tokens = 32 blocks): 128 + 6 x 96 = 704; each later
  // chunk adds 32 to the full table, the sliding ones stay at 96: 736 (2,048), 768 (2,560), 800
  // (3,072), 832 (3,584), 864 (4,096: table 288, 192 skipped); the last chunk (4,608 computed,
  // 392 tokens): table 313, 3,585 / 16 = 224 skipped, 313 + 6 x 89 = 847. The decode step (5,000
  // computed) frees more. Peak 864. With 894 blocks the gate's 895 never fit, and with nothing
  // else to free blocks kvsim rejects it as too long (vLLM's scheduler would leave it waiting).
  //
  // Llama-4-Scout (its weights need two H200s; each GPU holds every layer's share, so the groups
  // are the same): 1 full group (12 NoPE layers) and 3 chunked, chunks of 8,192. A
  // 20,000-token prompt is 1,250 blocks a table; uncapped 4 x 1,250 = 5,000. The cap of a chunked
  // group: ceil(min(8,192 + 512, 20,000) / 16) = 544. The gate asks 1,250 + 3 x 544 = 2,882.
  // Peak: after the chunk computed -> computed + 512 the tables are (c + 512) / 16 long and a
  // chunked one has freed floor(c / 8,192) x 512 blocks (the chunks before the current one's
  // start). The sum 4 (c + 512) / 16 - 3 x 512 x floor(c / 8,192) is largest just before a chunk
  // boundary, c + 512 = 8,192 k: 2,048 k - 1,536 (k - 1) = 512 k + 1,536; k = 2 (c = 15,872):
  // 1,024 + 3 x 512 = 2,560 (k = 1 gives 2,048). After it, c = 16,384 frees 512 more a group;
  // the last chunk (c = 19,968, 32 tokens) ends at 1,250 + 3 x 226 = 1,928. Peak 2,560.
  struct Case {
    const char* model;
    const char* gpu;
    int tp;
    int64_t prompt, gate, peak, pool;  // pool: a roomier one, where the peak is the same
  };
  for (const Case& c : {Case{"gemma-3-27b", "h100-sxm", 1, 5'000, 895, 864, 1'000},
                        Case{"llama-4-scout", "h200", 2, 20'000, 2'882, 2'560, 3'000}}) {
    INFO(c.model);
    for (const int64_t blocks : {c.gate, c.pool}) {
      const RunResult r = one_long_prompt(c.model, c.gpu, c.tp, c.prompt, blocks);
      REQUIRE(r.policies.size() == 1);
      const PolicySummary& p = r.policies[0];
      CHECK(test::count(p, Outcome::kCompleted) == 1);
      CHECK(peak_blocks(p, blocks) == c.peak);
    }
    const RunResult small = one_long_prompt(c.model, c.gpu, c.tp, c.prompt, c.gate - 1);
    CHECK(test::count(small.policies[0], Outcome::kRejectedTooLong) == 1);
  }
}

TEST_CASE("The watermark guard counts a block per block_size tokens in every group",
          "[engine][hybrid]") {
  // gpt-oss-120b: 2 groups (full, sliding 128). 100 blocks, watermark 0.01: the mark is 1 block.
  // A prompt of 800 tokens takes 50 blocks in each group, 100: 100 - 100 < 1, never above the
  // mark (rejected as too long), though the full-sequence gate alone would admit it (50 + the
  // sliding group's min(50, cap) = 100, the cap being over 8 blocks for any token budget). 784
  // tokens take 2 x 49 = 98: 100 - 98 = 2 >= 1, ok.
  const auto run = [](int64_t prompt) {
    return test::run_yaml(fmt::format(R"(
name: t
model: gpt-oss-120b
gpu: h100-sxm
engine: {{kv: {{type: paged, block_size: 16, num_blocks: 100}}}}
workload: {{arrivals: {{type: fixed, rate: 1}}, max_requests: 1, prompt_tokens: {},
           output_tokens: 1}}
policies: [{{name: p, guards: [{{type: watermark, watermark: 0.01}}]}}]
)",
                                      prompt));
  };
  CHECK(test::count(run(800).policies[0], Outcome::kRejectedTooLong) == 1);
  CHECK(test::count(run(784).policies[0], Outcome::kCompleted) == 1);
}

TEST_CASE("A lone request that preempts itself is scheduled again at the next step, not lost",
          "[engine][hybrid]") {
  // Gemma-3-27B (7 groups, window 1,024) in 64 blocks, synchronous scheduling: a 100-token
  // prompt takes 7 x 7 = 49 blocks; decoding, 113 tokens take 7 x 8 = 56, 129 take 63, and the
  // 145th token needs a tenth block in every group, 70 > 64: the request preempts itself, and
  // that step admits nothing. The next step's gate asks 7 x ceil(145 / 16) = 70 blocks of an
  // empty pool of 64: rejected as too long. (The replica used to go idle there, the request
  // left waiting until the run's end.)
  const RunResult r = test::run_yaml(R"(
name: t
model: gemma-3-27b
gpu: h100-sxm
engine: {async_scheduling: false, kv: {type: paged, block_size: 16, num_blocks: 64}}
workload: {arrivals: {type: fixed, rate: 1}, max_requests: 1, prompt_tokens: 100,
           output_tokens: 300}
policies: [{name: p, guards: []}]
)");
  const PolicySummary& p = r.policies[0];
  CHECK(p.preemptions == 1);
  CHECK(test::count(p, Outcome::kRejectedTooLong) == 1);
}
