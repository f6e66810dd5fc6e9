// vLLM's native KV offloading (engine.kv_offloading) on hand-computed runs. Every scenario:
// llama-3-8b (32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 131,072 bytes of KV a token)
// on an H200 (PCIe 5.0: 50e9 bytes/s each way in the catalog), 16-token GPU blocks, 600 of them,
// prefix caching on, Mooncake rows of 8,192 tokens (16 hashes of 512 tokens) and 1 output token,
// so a request's TTFT is its wait plus the iteration that prefills it.
//
// The rows: A at 0 s, B (other hashes) at 5 s, A again at 10 s. A takes 512 blocks; when it ends
// vLLM frees them tail first, so the free list is the 88 never-used blocks, then A's blocks
// 511 down to 0. B takes 512: the 88, then A's blocks 511..88. A's first 88 blocks (1,408
// tokens) stay cached on the GPU, the rest of its prefix is gone there.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <fmt/format.h>

#include "core/errors.h"
#include "core/sim_time.h"
#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;
using kvsim::test::run_yaml;

namespace {

namespace fs = std::filesystem;

std::string two_turn_yaml(const std::string& trace, const std::string& offloading) {
  return fmt::format(R"(
name: offload
model: llama-3-8b
gpu: h200
engine: {{max_num_seqs: 8, max_model_len: 8193, allow_long_max_model_len: true,
  max_num_batched_tokens: 8193, kv: {{type: paged, block_size: 16, num_blocks: 600, enable_prefix_caching: true}}}}
workload:
  trace: {{path: {}, format: mooncake}}
policies:
  - name: gpu-only
    guards: []
  - name: cpu-tier
    engine: {{kv_offloading: {}}}
    guards: []
)",
                     trace, offloading);
}

RunResult run_two_turns(const std::string& offloading) {
  const fs::path trace =
      fs::temp_directory_path() / fmt::format("kvsim-offload-{}.jsonl", ::getpid());
  kvsim::test::write_mooncake_trace(trace, 8192, 16, {{0, 0}, {5000, 100}, {10000, 0}});
  const RunResult r = run_yaml(two_turn_yaml(trace.string(), offloading));
  fs::remove(trace);
  return r;
}

// One iteration prefilling `tokens` after `context` cached ones, on the engine's ns clock.
double offloading_iteration_s(int64_t tokens, int64_t context) {
  const Catalog& c = Catalog::builtin();
  const GpuSpec& gpu = c.gpu("h200");
  const LatencyModel lm(c.model("llama-3-8b"), gpu, default_profile(gpu), AttentionKind::kFlash);
  BatchShape b;
  b.block_tokens = 16;
  b.prefill.push_back({.tokens = tokens, .context_tokens = context, .emits_token = true});
  return sim_to_seconds(std::max<SimTime>(1, seconds_to_sim(lm.iteration(b).seconds)));
}

}  // namespace

// With a 4 GiB tier (4 x 2^30 / (16 x 131,072) = 2,048 blocks) A's 512 blocks and B's 512 are
// stored (nothing evicted). The repeat of A: GPU hit 88 blocks; the tier's lookup covers blocks
// 88..510 (at most (8,192 - 1) / 16 = 511 blocks: the last token is computed): 423 blocks =
// 6,768 tokens, loaded host-to-device in 423 x 2,097,152 B / 50e9 B/s = 0.01774190592 s
// (17,741,906 ns). Meanwhile it is not scheduled; then it prefills 16 tokens after 8,176.
// TTFTs: A and B 8,192 tokens on an empty cache; the repeat load + iteration(16, 8,176), against
// iteration(6,784, 1,408) without the tier. Tier figures: queried 8,192 + 8,192 + (8,192 -
// 1,408) = 23,168 tokens, hit 6,768; stored 1,024 blocks, evicted 0, one load of 423 blocks.
TEST_CASE("a second turn whose prefix left the GPU loads it from the CPU tier",
          "[engine][offload]") {
  const RunResult r = run_two_turns("{backend: native, size_gib: 4}");
  const PolicySummary& gpu = r.policies.at(0);
  const PolicySummary& cpu = r.policies.at(1);
  const double first = offloading_iteration_s(8192, 0);
  const double load = sim_to_seconds(17'741'906);
  const double repeat_gpu = offloading_iteration_s(6784, 1408);
  const double repeat_cpu = load + offloading_iteration_s(16, 8176);
  CHECK(repeat_cpu < repeat_gpu / 5);
  REQUIRE(gpu.ttft.count == 3);
  REQUIRE(cpu.ttft.count == 3);
  CHECK(gpu.ttft.mean == Approx((2 * first + repeat_gpu) / 3).epsilon(1e-12));
  CHECK(cpu.ttft.mean == Approx((2 * first + repeat_cpu) / 3).epsilon(1e-12));
  CHECK(cpu.prefix_hit_tokens == 1408);  // the GPU tier's hit, the same in both
  CHECK(gpu.prefix_hit_tokens == 1408);
  REQUIRE(cpu.kv_offloading.has_value());
  CHECK_FALSE(gpu.kv_offloading.has_value());
  const OffloadStats& k = *cpu.kv_offloading;
  CHECK(k.capacity_blocks == 2048);
  CHECK(k.block_bytes == 2'097'152);
  CHECK(k.query_tokens == 23'168);
  CHECK(k.hit_tokens == 6'768);
  CHECK(k.loads == 1);
  CHECK(k.loaded_blocks == 423);
  CHECK(k.loaded_bytes() == 887'095'296);
  CHECK(k.stored_blocks == 1024);
  CHECK(k.evicted_blocks == 0);
  CHECK(k.peak_blocks == 1024);
  CHECK(k.load_busy_s == Approx(0.01774190592).epsilon(1e-12));
}

// A 1 GiB tier holds 512 blocks: B's stores evict all of A's (LRU, all ready by then), so the
// repeat finds nothing past its GPU hit and runs as without the tier; its own stores then evict
// B's 512 blocks. Stored 512 + 512 + 512 = 1,536, evicted 1,024, 512 held.
TEST_CASE("a tier too small for both prompts does not change the repeat's TTFT",
          "[engine][offload]") {
  const RunResult r = run_two_turns("{backend: native, size_gib: 1}");
  const PolicySummary& gpu = r.policies.at(0);
  const PolicySummary& cpu = r.policies.at(1);
  CHECK(cpu.ttft.mean == gpu.ttft.mean);
  const OffloadStats& k = *cpu.kv_offloading;
  CHECK(k.capacity_blocks == 512);
  CHECK(k.hit_tokens == 0);
  CHECK(k.loads == 0);
  CHECK(k.stored_blocks == 1536);
  CHECK(k.evicted_blocks == 1024);
  CHECK(k.peak_blocks == 512);
}

TEST_CASE("kv_offloading needs a paged store with prefix caching", "[engine][offload]") {
  const std::string yaml = R"(
name: bad
model: llama-3-8b
gpu: h200
engine: {kv: {type: paged, block_size: 16}, kv_offloading: {size_gib: 4}}
workload: {requests: 1, prompt: {type: fixed, tokens: 100}, output: {type: fixed, tokens: 1}}
policies: [{name: p, guards: []}]
)";
  CHECK_THROWS_WITH(run_yaml(yaml), Catch::Contains("test.yaml:5:") &&
                                        Catch::Contains("enable_prefix_caching: true"));
}

// block_size_multiple 4: offloaded blocks of 64 tokens (8,388,608 bytes), 4 GiB / 8 MiB = 512 of
// them. The repeat's GPU hit, 1,408 tokens, is 22 offloaded blocks; the tier's lookup runs from
// block 22 to (8,192 - 1) / 64 = 127: 105 blocks = 6,720 tokens (8,128 in all), loaded in
// 105 x 8,388,608 B / 50e9 B/s = 0.0176160768 s (17,616,077 ns); then 64 tokens are prefilled
// after 8,128. A's and B's 128 blocks each are stored.
TEST_CASE("offloaded blocks of several GPU blocks load in whole offloaded blocks",
          "[engine][offload]") {
  const RunResult r = run_two_turns("{backend: native, size_gib: 4, block_size_multiple: 4}");
  const PolicySummary& cpu = r.policies.at(1);
  const double first = offloading_iteration_s(8192, 0);
  const double repeat = sim_to_seconds(17'616'077) + offloading_iteration_s(64, 8128);
  CHECK(cpu.ttft.mean == Approx((2 * first + repeat) / 3).epsilon(1e-12));
  const OffloadStats& k = *cpu.kv_offloading;
  CHECK(k.block_tokens == 64);
  CHECK(k.capacity_blocks == 512);
  CHECK(k.hit_tokens == 6720);
  CHECK(k.loaded_blocks == 105);
  CHECK(k.loaded_bytes() == 880'803'840);
  CHECK(k.stored_blocks == 256);
}
