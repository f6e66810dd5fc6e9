// The precise_prefix router (sim/cluster/precise_prefix_router.cc): its choice by what each
// replica's tiers hold, fed KV events by hand, the scores worked out on paper; and a cluster run
// in which the engines' own events send a repeated prompt to the replica that cached it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <fmt/format.h>

#include "models/memory/block_keys.h"
#include "models/memory/offload/offload_tier.h"
#include "sim/cluster/router.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;

namespace {

std::unique_ptr<Router> precise_router() {
  return make_router(ConfigNode::parse_string("{type: precise_prefix}", "router.yaml"), {});
}

// A 64-token prompt with one hash per 16 tokens: 4 GPU blocks of 16, 2 CPU blocks of 32.
RequestSpec precise_spec() {
  RequestSpec s;
  s.prompt_tokens = 64;
  s.hash_block_tokens = 16;
  s.prefix_hashes = {11, 22, 33, 44};
  return s;
}

uint64_t precise_gpu_key(const RequestSpec& s, int64_t i) {
  const PrefixHashes p{.hashes = s.prefix_hashes, .block_tokens = 16, .prompt_tokens = 64};
  return hashed_block_key(p, i, 16);
}

uint64_t precise_cpu_key(const RequestSpec& s, int64_t j) {
  return offload_block_key(s.prefix_hashes, 16, j, 32);
}

KvBlockEvent precise_gpu(const RequestSpec& s, int64_t i, bool removed = false) {
  return {.medium = KvMedium::kGpu,
          .removed = removed,
          .key = precise_gpu_key(s, i),
          .block_tokens = 16};
}

KvBlockEvent precise_cpu(const RequestSpec& s, int64_t j, bool removed = false) {
  return {.medium = KvMedium::kCpu,
          .removed = removed,
          .key = precise_cpu_key(s, j),
          .block_tokens = 32};
}

}  // namespace

// Weights gpu 1.0, cpu 0.8 (the defaults); a score is the sum over the leading blocks held
// somewhere of 16 tokens x the best tier's weight.
//   replica 0: GPU blocks 0, 1                     -> 16 + 16             = 32
//   replica 1: CPU blocks 0, 1 (GPU blocks 0..3)   -> 4 x 16 x 0.8        = 51.2
//   replica 2: GPU block 0, CPU block 1 (not 0)    -> block 1 missing: 16
//   replica 3: GPU blocks 1, 2, 3 (not 0)          -> 0
TEST_CASE("precise_prefix picks the replica by the blocks each tier holds", "[cluster][router]") {
  const RequestSpec s = precise_spec();
  auto r = precise_router();
  REQUIRE(r->wants_kv_events());
  r->on_kv_event(0, precise_gpu(s, 0));
  r->on_kv_event(0, precise_gpu(s, 1));
  r->on_kv_event(1, precise_cpu(s, 0));
  r->on_kv_event(1, precise_cpu(s, 1));
  r->on_kv_event(2, precise_gpu(s, 0));
  r->on_kv_event(2, precise_cpu(s, 1));
  for (int i = 1; i <= 3; ++i) r->on_kv_event(3, precise_gpu(s, i));
  std::vector<ReplicaView> v(4);
  CHECK(r->route(s, v) == 1);  // 51.2 beats 32
  // CPU block 1 leaves replica 1: 2 x 16 x 0.8 = 25.6 < 32.
  r->on_kv_event(1, precise_cpu(s, 1, /*removed=*/true));
  CHECK(r->route(s, v) == 0);
  // Replica 1's GPU gets block 0: 16 x 1.0 + 16 x 0.8 = 28.8, still < 32.
  r->on_kv_event(1, precise_gpu(s, 0));
  CHECK(r->route(s, v) == 0);
  // Replica 0 down: 28.8 (replica 1) beats 16 (replica 2).
  v[0].up = false;
  CHECK(r->route(s, v) == 1);
  // Replica 3 gets block 0 back: 4 x 16 = 64 on the GPU beats everything.
  r->on_kv_event(3, precise_gpu(s, 0));
  CHECK(r->route(s, v) == 3);
}

// A prompt nobody holds scores 0 everywhere: the fewest outstanding wins, the lowest index on a
// tie; a down replica is never chosen.
TEST_CASE("precise_prefix breaks equal scores by outstanding requests", "[cluster][router]") {
  auto r = precise_router();
  RequestSpec fresh = precise_spec();
  fresh.prefix_hashes = {7, 8, 9, 10};
  std::vector<ReplicaView> v = {
      {.outstanding = 3}, {.outstanding = 1}, {.outstanding = 1}, {.outstanding = 2}};
  CHECK(r->route(fresh, v) == 1);
  v[1].up = false;
  CHECK(r->route(fresh, v) == 2);
  // Equal non-zero scores: replicas 2 and 3 both hold GPU block 0; 3 has more outstanding.
  const RequestSpec s = precise_spec();
  r->on_kv_event(2, precise_gpu(s, 0));
  r->on_kv_event(3, precise_gpu(s, 0));
  v[2].outstanding = 5;
  CHECK(r->route(s, v) == 3);
  for (auto& x : v) x.up = false;
  CHECK(r->route(s, v) == -1);
}

// Weights from the router's map: with cpu_weight 2 a CPU block outscores a GPU block.
TEST_CASE("precise_prefix reads its tier weights", "[cluster][router]") {
  auto r =
      make_router(ConfigNode::parse_string("{type: precise_prefix, cpu_weight: 2}", "r.yaml"), {});
  const RequestSpec s = precise_spec();
  // Replica 0: GPU blocks 0..3 = 64; replica 1: CPU block 0 = 2 x 16 x 2 = 64, then nothing:
  // equal, so the fewer outstanding (replica 1) wins.
  for (int i = 0; i < 4; ++i) r->on_kv_event(0, precise_gpu(s, i));
  r->on_kv_event(1, precise_cpu(s, 0));
  std::vector<ReplicaView> v = {{.outstanding = 1}, {.outstanding = 0}};
  CHECK(r->route(s, v) == 1);
  v[1].outstanding = 2;
  CHECK(r->route(s, v) == 0);
  CHECK_THROWS_WITH(
      make_router(ConfigNode::parse_string("{type: precise_prefix, gpu_weight: -1}", "r.yaml"), {}),
      Catch::Contains("gpu_weight"));
}

// Two llama-3-8b replicas on H200s (prefix caching, 600 blocks of 16 tokens), a Mooncake trace
// of 2,048-token prompts (4 hashes of 512), 1 output token: A at 0 s, B at 1 ms (A still in
// flight: B goes to the replica with fewer outstanding), then B again at 5 s with both idle.
// Both replicas score 0 for A: replica 0 (lowest index). B: replica 0 has 1 outstanding,
// replica 1 none: replica 1. B again: replica 1's engine reported B's 128 blocks stored (its
// GPU keeps them: nothing else ran there), replica 0's hold none of B's, so replica 1 (score
// 2,048). least_outstanding sends the repeat to replica 0 (both idle: the lowest index), which
// must recompute it: the precise router's prefix hit is (2,048 - 1) / 16 = 127 blocks = 2,032
// tokens, least_outstanding's 0.
TEST_CASE("precise_prefix follows the engines' own KV events in a cluster run",
          "[engine][cluster][router]") {
  namespace fs = std::filesystem;
  const fs::path trace =
      fs::temp_directory_path() / fmt::format("kvsim-precise-{}.jsonl", ::getpid());
  kvsim::test::write_mooncake_trace(trace, 2048, 4, {{0, 0}, {1, 100}, {5000, 100}});
  const RunResult r = kvsim::test::run_yaml(fmt::format(R"(
name: precise
model: llama-3-8b
gpu: h200
engine: {{max_num_seqs: 8, max_num_batched_tokens: 8192,
  kv: {{type: paged, block_size: 16, num_blocks: 600, enable_prefix_caching: true}}}}
cluster: {{replicas: [{{name: r, count: 2}}], router: {{type: precise_prefix}}}}
workload:
  trace: {{path: {}, format: mooncake}}
policies:
  - name: precise
    guards: []
  - name: least-outstanding
    cluster: {{router: {{type: least_outstanding}}}}
    guards: []
)",
                                                        trace.string()));
  fs::remove(trace);
  const PolicySummary& precise = r.policies.at(0);
  const PolicySummary& least = r.policies.at(1);
  CHECK(precise.cluster->replicas.at(0).requests_total == 1);
  CHECK(precise.cluster->replicas.at(1).requests_total == 2);
  CHECK(least.cluster->replicas.at(0).requests_total == 2);
  CHECK(least.cluster->replicas.at(1).requests_total == 1);
  CHECK(precise.prefix_hit_tokens == 2032);
  CHECK(least.prefix_hit_tokens == 0);
}
