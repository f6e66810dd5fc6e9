// Automatic prefix caching saves compute: a request whose first k full blocks
// are cached prefills only the tokens after them, attention reading the cached ones as context,
// and each policy reports its prefix hits. Every scenario: llama-3-8b on an H200, paged blocks of
// 16 tokens, Mooncake traces (one hash per 512 prompt tokens), outputs of 1 token so that a
// request's TTFT is the wall time of the iterations that prefill it. The expected TTFTs are the
// latency model's times for the batch shapes worked out below, each rounded to the engine's
// nanosecond clock as the engine does.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/sim_time.h"
#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;
using kvsim::test::run_yaml;

namespace {

namespace fs = std::filesystem;

struct Row {
  double timestamp_ms;
  int64_t input;
  std::vector<int> hashes;
};

// Writes a Mooncake trace and runs it under one policy with enable_prefix_caching (`apc`) and
// one without (`off`). max_model_len 8,193 (allowed past Llama-3-8B's 8,192 positions) lets an
// 8,192-token prompt with its one output token in; the budgets of 8,193 keep vLLM's check.
RunResult run_trace(const std::vector<Row>& rows, const std::string& engine_extra) {
  const fs::path trace =
      fs::temp_directory_path() / fmt::format("kvsim-prefix-{}-{}.jsonl", ::getpid(), rows.size());
  {
    std::ofstream out(trace);
    for (const Row& r : rows) {
      out << fmt::format(
                 R"({{"timestamp": {}, "input_length": {}, "output_length": 1, "hash_ids": [{}]}})",
                 r.timestamp_ms, r.input, fmt::join(r.hashes, ", "))
          << "\n";
    }
  }
  const RunResult res = run_yaml(fmt::format(R"(
name: prefix
model: llama-3-8b
gpu: h200
engine: {{max_num_seqs: 8, max_model_len: 8193, allow_long_max_model_len: true, {}, kv: {{type: paged, block_size: 16}}}}
workload:
  trace: {{path: {}, format: mooncake}}
policies:
  - name: apc
    engine: {{kv: {{type: paged, block_size: 16, enable_prefix_caching: true}}}}
    guards: []
  - name: off
    guards: []
)",
                                             engine_extra, trace.string()));
  fs::remove(trace);
  return res;
}

// Wall time of one iteration that prefills `tokens` tokens after `context` cached ones, as the
// engine schedules it (rounded to whole nanoseconds).
double iteration_s(int64_t tokens, int64_t context, bool emits = true) {
  const Catalog& c = Catalog::builtin();
  const GpuSpec& gpu = c.gpu("h200");
  const LatencyModel lm(c.model("llama-3-8b"), gpu, default_profile(gpu), AttentionKind::kFlash);
  BatchShape b;
  b.block_tokens = 16;
  b.prefill.push_back({.tokens = tokens, .context_tokens = context, .emits_token = emits});
  return sim_to_seconds(std::max<SimTime>(1, seconds_to_sim(lm.iteration(b).seconds)));
}

// Two requests with TTFTs a <= b: the NumPy percentiles of {a, b} are p50 = (a + b) / 2 and
// p90 = a + 0.9 (b - a).
void check_ttfts(const PolicySummary& p, double a, double b) {
  REQUIRE(p.ttft.count == 2);
  CHECK(p.ttft.p50 == Approx((a + b) / 2).epsilon(1e-12));
  CHECK(p.ttft.p90 == Approx(a + 0.9 * (b - a)).epsilon(1e-12));
}

const std::vector<int> kHashes16 = {0, 1, 2,  3,  4,  5,  6,  7,
                                    8, 9, 10, 11, 12, 13, 14, 15};  // 16 x 512 = 8,192 tokens

}  // namespace

// (a) The same 8,192-token prompt at 0 s and again at 10 s (the first long done by then).
// The first is a miss: one iteration prefilling 8,192 tokens on an empty cache. Its 512 blocks
// are then cached; the repeat's lookup stops one token short of the whole prompt, in whole blocks:
// (8,192 - 1) / 16 = 511 blocks = 8,176 tokens hit, so the repeat prefills 16 tokens with context
// 8,176. Counters: queries 2 x 8,192 = 16,384 tokens, hits 511 blocks = 8,176 tokens, hit rate
// 8,176 / 16,384 = 0.4990234375. Without prefix caching both TTFTs are the 8,192-token
// iteration's, and there are no prefix figures.
TEST_CASE("a repeated 8k prompt prefills only its last block", "[engine][prefix]") {
  const RunResult r =
      run_trace({{0, 8192, kHashes16}, {10000, 8192, kHashes16}}, "max_num_batched_tokens: 8193");
  const PolicySummary& apc = r.policies.at(0);
  const PolicySummary& off = r.policies.at(1);
  const double first = iteration_s(8192, 0);
  const double repeat = iteration_s(16, 8176);
  CHECK(repeat < first / 20);  // far smaller: a 16-token step instead of an 8k prefill
  check_ttfts(apc, repeat, first);
  CHECK(apc.prefix_caching);
  CHECK(apc.prefix_hit_blocks == 511);
  CHECK(apc.prefix_hit_tokens == 8176);
  CHECK(apc.prefix_query_tokens == 16384);
  CHECK(apc.prefix_hit_rate == 0.4990234375);
  check_ttfts(off, first, first);
  CHECK_FALSE(off.prefix_caching);
  CHECK(off.prefix_query_tokens == 0);
}

// (b) A partial hit: 2,048-token prompts sharing their first two hash blocks (1,024 tokens) and
// then differing. The second hits 1,024 / 16 = 64 blocks and prefills 1,024 tokens with context
// 1,024. Queries 4,096, hits 1,024 tokens: rate 0.25.
TEST_CASE("a prompt sharing its first blocks prefills only its own suffix", "[engine][prefix]") {
  const RunResult r = run_trace({{0, 2048, {0, 1, 2, 3}}, {10000, 2048, {0, 1, 8, 9}}},
                                "max_num_batched_tokens: 8193");
  const PolicySummary& apc = r.policies.at(0);
  check_ttfts(apc, iteration_s(1024, 1024), iteration_s(2048, 0));
  CHECK(apc.prefix_hit_blocks == 64);
  CHECK(apc.prefix_hit_tokens == 1024);
  CHECK(apc.prefix_query_tokens == 4096);
  CHECK(apc.prefix_hit_rate == 0.25);
  check_ttfts(r.policies.at(1), iteration_s(2048, 0), iteration_s(2048, 0));
}

// (c) Chunked prefill, 512-token budget. The first 2,048-token prompt runs in 4 chunks of 512
// (contexts 0, 512, 1,024, 1,536; only the last emits its token); its blocks are cached chunk by
// chunk (the first at admission, the next three as its allocation grows). The second shares the
// first three hash blocks (1,536 tokens = 96 blocks, keyed by all of the first three chunks) and
// prefills its last 512 tokens in one chunk with context 1,536. Queries 4,096, hits 1,536: 0.375.
TEST_CASE("chunked prefill starts after the cached prefix", "[engine][prefix]") {
  const RunResult r = run_trace({{0, 2048, {0, 1, 2, 3}}, {10000, 2048, {0, 1, 2, 9}}},
                                "max_num_batched_tokens: 512, chunked_prefill: true");
  const PolicySummary& apc = r.policies.at(0);
  const double first = iteration_s(512, 0, false) + iteration_s(512, 512, false) +
                       iteration_s(512, 1024, false) + iteration_s(512, 1536);
  check_ttfts(apc, iteration_s(512, 1536), first);
  CHECK(apc.prefix_hit_blocks == 96);
  CHECK(apc.prefix_hit_tokens == 1536);
  CHECK(apc.prefix_query_tokens == 4096);
  CHECK(apc.prefix_hit_rate == 0.375);
  check_ttfts(r.policies.at(1), first, first);
}

// (d) Different hashes from the first block on: no hit, both prompts prefill whole; the lookups
// still count as queries (4,096 tokens), so the rate is 0.
TEST_CASE("prompts with different hashes share nothing", "[engine][prefix]") {
  const RunResult r = run_trace({{0, 2048, {0, 1, 2, 3}}, {10000, 2048, {4, 5, 6, 7}}},
                                "max_num_batched_tokens: 8193");
  const PolicySummary& apc = r.policies.at(0);
  check_ttfts(apc, iteration_s(2048, 0), iteration_s(2048, 0));
  CHECK(apc.prefix_caching);
  CHECK(apc.prefix_hit_blocks == 0);
  CHECK(apc.prefix_hit_tokens == 0);
  CHECK(apc.prefix_query_tokens == 4096);
  CHECK(apc.prefix_hit_rate == 0.0);
}
