// The CPU tier's eviction policy (eviction_policy: arc) and reuse gating (store_threshold) on the
// two-turn run of kv_offloading_test.cc: llama-3-8b on an H200, 600 GPU blocks of 16 tokens,
// Mooncake rows of 8,192 tokens (16 hashes of 512), A at 0 s, B at 5 s, A again at 10 s; the
// repeat keeps 88 of A's blocks on the GPU (1,408 tokens) and must find the rest in the tier.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <fmt/format.h>

#include "tests/engine/engine_test_util.h"

using namespace kvsim;
using kvsim::test::run_yaml;

namespace {

RunResult policy_two_turns(const std::string& offloading) {
  namespace fs = std::filesystem;
  const fs::path trace =
      fs::temp_directory_path() / fmt::format("kvsim-offload-policy-{}.jsonl", ::getpid());
  kvsim::test::write_mooncake_trace(trace, 8192, 16, {{0, 0}, {5000, 100}, {10000, 0}});
  const RunResult r = run_yaml(fmt::format(R"(
name: offload-policy
model: llama-3-8b
gpu: h200
engine: {{max_num_seqs: 8, max_model_len: 8193, allow_long_max_model_len: true,
  max_num_batched_tokens: 8193, kv: {{type: paged, block_size: 16, num_blocks: 600, enable_prefix_caching: true}}}}
workload:
  trace: {{path: {}, format: mooncake}}
policies:
  - name: gpu-only
    guards: []
  - name: tier
    engine: {{kv_offloading: {}}}
    guards: []
)",
                                           trace.string(), offloading));
  fs::remove(trace);
  return r;
}

}  // namespace

// store_threshold 2, a 4 GiB tier (room for all). A's lookup walks blocks 0..510 (at most
// (8,192 - 1) / 16 = 511: the last token is computed) once: its store of blocks 0..511 finds none
// seen twice, so all 512 are gated; B's the same. The repeat's lookup walks blocks 88..510 (past
// its GPU hit): they are seen twice now, but nothing is stored yet, so it recomputes as without
// the tier; its store then stores those 423 and gates the other 89 (0..87, never walked twice,
// and 511, never walked). Gated 512 + 512 + 89 = 1,113, stored 423.
TEST_CASE("reuse gating stores only blocks a lookup has seen store_threshold times",
          "[engine][offload]") {
  const RunResult r = policy_two_turns("{backend: native, size_gib: 4, store_threshold: 2}");
  const PolicySummary& gpu = r.policies.at(0);
  const PolicySummary& tier = r.policies.at(1);
  CHECK(tier.ttft.mean == gpu.ttft.mean);
  const OffloadStats& k = *tier.kv_offloading;
  CHECK(k.store_threshold == 2);
  CHECK(k.gated_blocks == 1113);
  CHECK(k.stored_blocks == 423);
  CHECK(k.hit_tokens == 0);
  CHECK(k.loads == 0);
}

// ARC with a 1 GiB tier (512 blocks). A's 512 blocks enter T1. B's store evicts them all from T1
// (target 0) into the ghost list B1. The repeat's lookup touches A's blocks 0..510, all B1 ghosts:
// each raises T1's target by max(1, |B2| / |B1| = 0) = 1, to 511. The repeat misses (A's blocks
// are gone) and recomputes; its store needs 512 slots: T1 (B's 512) is at or above the target
// for two evictions (512, 511 >= 511), then below it, and T2 is empty: not enough can go, so
// nothing is stored (vLLM's ARCOffloadingManager returns None there too). LRU instead evicts B's
// 512 for A's. ARC: stored 1,024, evicted 512, one skipped store; LRU: 1,536, 1,024, none.
TEST_CASE("the ARC tier refuses a store that T1's target protects", "[engine][offload]") {
  const RunResult arc = policy_two_turns("{backend: native, size_gib: 1, eviction_policy: arc}");
  const RunResult lru = policy_two_turns("{backend: native, size_gib: 1}");
  const OffloadStats& a = *arc.policies.at(1).kv_offloading;
  const OffloadStats& l = *lru.policies.at(1).kv_offloading;
  CHECK(a.eviction_policy == "arc");
  CHECK(a.stored_blocks == 1024);
  CHECK(a.evicted_blocks == 512);
  CHECK(a.skipped_stores == 1);
  CHECK(l.stored_blocks == 1536);
  CHECK(l.evicted_blocks == 1024);
  CHECK(l.skipped_stores == 0);
  CHECK(arc.policies.at(1).ttft.mean == lru.policies.at(1).ttft.mean);  // neither hits
}

// Bad values of the new keys are errors at their file:line:col.
TEST_CASE("bad eviction, gating and disk settings are errors at their position",
          "[engine][offload][errors]") {
  const auto error_of = [](const std::string& offloading) {
    const std::string yaml = fmt::format(R"(name: bad
model: llama-3-8b
gpu: h200
engine: {{kv: {{type: paged, block_size: 16, enable_prefix_caching: true}}, kv_offloading: {}}}
workload: {{arrivals: {{type: fixed, rate: 1}}, max_requests: 1, prompt_tokens: 100, output_tokens: 1}}
policies: [{{name: p, guards: []}}]
)",
                                         offloading);
    return kvsim::test::prepare_error(yaml);
  };
  CHECK_THAT(error_of("{size_gib: 1, eviction_policy: fifo}"),
             Catch::Contains("bad.yaml:4:") && Catch::Contains("eviction_policy"));
  CHECK_THAT(error_of("{size_gib: 1, store_threshold: -1}"),
             Catch::Contains("bad.yaml:4:") && Catch::Contains("store_threshold"));
  CHECK_THAT(error_of("{size_gib: 1, disk: {size_gib: 0}}"),
             Catch::Contains("bad.yaml:4:") && Catch::Contains("size_gib"));
  CHECK_THAT(error_of("{size_gib: 1, disk: {size_gib: 8, read_gbps: 3}}"),
             Catch::Contains("bad.yaml:4:") && Catch::Contains("read_gbps"));
}
