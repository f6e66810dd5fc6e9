// The disk tier under the CPU tier (engine.kv_offloading.disk) on a hand-computed run: the setup
// of kv_offloading_test.cc (llama-3-8b, 131,072 bytes of KV a token; an H200, PCIe 5.0 at 50e9
// bytes/s; 600 GPU blocks of 16 tokens; Mooncake rows of 8,192 tokens, A at 0 s, B at 5 s, A
// again at 10 s, 1 output token) with a 1 GiB CPU tier (512 blocks of 2,097,152 bytes) and a
// 4 GiB disk (2,048 blocks) reading at 7e9 and writing at 5e9 bytes/s, 100 us a transfer.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <fmt/format.h>

#include "core/sim_time.h"
#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;
using kvsim::test::run_yaml;

namespace {

RunResult disk_two_turns(const std::string& offloading) {
  namespace fs = std::filesystem;
  const fs::path trace =
      fs::temp_directory_path() / fmt::format("kvsim-offload-disk-{}.jsonl", ::getpid());
  kvsim::test::write_mooncake_trace(trace, 8192, 16, {{0, 0}, {5000, 100}, {10000, 0}});
  const RunResult r = run_yaml(fmt::format(R"(
name: offload-disk
model: llama-3-8b
gpu: h200
engine: {{max_num_seqs: 8, max_model_len: 8193, allow_long_max_model_len: true,
  max_num_batched_tokens: 8193, kv: {{type: paged, block_size: 16, num_blocks: 600, enable_prefix_caching: true}}}}
workload:
  trace: {{path: {}, format: mooncake}}
policies:
  - name: tiers
    engine: {{kv_offloading: {}}}
    guards: []
)",
                                           trace.string(), offloading));
  fs::remove(trace);
  return r;
}

double disk_iteration_s(int64_t tokens, int64_t context) {
  const Catalog& c = Catalog::builtin();
  const GpuSpec& gpu = c.gpu("h200");
  const LatencyModel lm(c.model("llama-3-8b"), gpu, default_profile(gpu), AttentionKind::kFlash);
  BatchShape b;
  b.block_tokens = 16;
  b.prefill.push_back({.tokens = tokens, .context_tokens = context, .emits_token = true});
  return sim_to_seconds(std::max<SimTime>(1, seconds_to_sim(lm.iteration(b).seconds)));
}

}  // namespace

// B's store evicts all 512 of A's CPU blocks (the tier holds 512); they are written to disk:
// 100 us + 512 x 2,097,152 B / 5e9 B/s. The repeat of A keeps its 88-block GPU hit (1,408
// tokens); the CPU tier holds none of its blocks past it, the disk holds blocks 88..510 (at most
// (8,192 - 1) / 16 = 511): 423 blocks = 6,768 tokens, read in 100 us + 887,095,296 B / 7e9 B/s
// (126,827,899 ns), then over PCIe in 887,095,296 B / 50e9 B/s (17,741,906 ns). It then prefills
// 16 tokens after 8,176. Its own store is block 511 only (the loaded blocks count as offloaded,
// as vLLM's connector counts them), which evicts B's least recently used block (B's last:
// touch leaves a prefix's first block the most recent) to disk: 513 disk blocks written.
TEST_CASE("a prefix evicted from the CPU tier loads from the disk tier", "[engine][offload]") {
  const RunResult r = disk_two_turns(
      "{backend: native, size_gib: 1, disk: {size_gib: 4, read_gb_per_s: 7, write_gb_per_s: 5, "
      "latency_us: 100}}");
  const PolicySummary& p = r.policies.at(0);
  const double first = disk_iteration_s(8192, 0);
  const SimTime read = seconds_to_sim(1e-4 + 887'095'296 / 7e9);
  REQUIRE(read == 126'827'899);
  const double repeat = sim_to_seconds(read + 17'741'906) + disk_iteration_s(16, 8176);
  REQUIRE(p.ttft.count == 3);
  CHECK(p.ttft.mean == Approx((2 * first + repeat) / 3).epsilon(1e-12));
  CHECK(p.prefix_hit_tokens == 1408);
  REQUIRE(p.kv_offloading.has_value());
  const OffloadStats& k = *p.kv_offloading;
  CHECK(k.capacity_blocks == 512);
  CHECK(k.hit_tokens == 6768);  // the tiers' hit: here all of it from disk
  CHECK(k.loads == 1);
  CHECK(k.loaded_blocks == 423);  // every loaded block crosses PCIe
  CHECK(k.stored_blocks == 1025);
  CHECK(k.evicted_blocks == 513);
  REQUIRE(k.disk.has_value());
  const DiskTierStats& d = *k.disk;
  CHECK(d.capacity_blocks == 2048);
  CHECK(d.loaded_blocks == 423);
  CHECK(d.stored_blocks == 513);
  CHECK(d.evicted_blocks == 0);
  CHECK(d.dropped_blocks == 0);
  CHECK(d.peak_blocks == 513);
  CHECK(d.read_busy_s == Approx(1e-4 + 887'095'296 / 7e9).epsilon(1e-12));
  CHECK(d.write_busy_s == Approx(2e-4 + 513 * 2'097'152 / 5e9).epsilon(1e-12));
  // The TTFT split: each request is scheduled as it arrives or as its load ends (the engine is
  // idle then), so nothing queues; the repeat's loading is its disk read plus its PCIe copy.
  REQUIRE(k.ttft_count == 3);
  CHECK(k.ttft_queueing_s == 0);
  CHECK(k.ttft_loading_s == Approx(sim_to_seconds(read + 17'741'906)).epsilon(1e-12));
  CHECK(k.ttft_prefill_s == Approx(2 * first + disk_iteration_s(16, 8176)).epsilon(1e-12));
}

// A disk of 256 MiB (128 blocks) cannot take the 512 blocks B's store evicts from the CPU tier
// at once: like the CPU tier's prepare_store, a write that cannot make room for all its blocks
// stores none, and they are dropped. The repeat then finds nothing past its GPU hit, recomputes
// as it would without the disk, and its own store of 512 blocks evicts B's 512: dropped too.
// Dropped 1,024, written 0, and the TTFTs equal the run without a disk.
TEST_CASE("a disk tier too small for the evicted blocks is not hit", "[engine][offload]") {
  const RunResult with = disk_two_turns("{backend: native, size_gib: 1, disk: {size_gib: 0.25}}");
  const RunResult without = disk_two_turns("{backend: native, size_gib: 1}");
  const OffloadStats& k = *with.policies.at(0).kv_offloading;
  CHECK(k.hit_tokens == 0);
  CHECK(with.policies.at(0).ttft.mean == without.policies.at(0).ttft.mean);
  const DiskTierStats& d = *k.disk;
  CHECK(d.capacity_blocks == 128);
  CHECK(d.loaded_blocks == 0);
  CHECK(d.stored_blocks == 0);
  CHECK(d.dropped_blocks == 1024);
  CHECK(d.peak_blocks == 0);
  CHECK_FALSE(without.policies.at(0).kv_offloading->disk.has_value());
}
