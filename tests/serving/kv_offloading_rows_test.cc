// The offload tiers in the result files: timeseries.csv's tier occupancy, requests.csv's TTFT
// split and the timeline's tier counter, on the hand-computed run of kv_offloading_disk_test.cc
// (llama-3-8b, 131,072 bytes of KV a token, so a 16-token block is 2,097,152 bytes; an H200,
// PCIe 5.0 at 50e9 bytes/s; 600 GPU blocks; Mooncake rows of 8,192 tokens: A at 0 s, B at 5 s,
// A again at 10 s; 1 output token) with a 1 GiB CPU tier (512 blocks) over a 4 GiB disk, beside
// a policy without offloading.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "core/sim_time.h"
#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;

namespace {

namespace fs = std::filesystem;

// The run's output folder (and its timeline), written once for every test here.
fs::path tier_rows_run() {
  static const fs::path dir = [] {
    const fs::path d = kvsim::test::fresh_dir("kv-offloading-rows");
    const fs::path trace = d / "trace.jsonl";
    kvsim::test::write_mooncake_trace(trace, 8192, 16, {{0, 0}, {5000, 100}, {10000, 0}});
    const std::string yaml = fmt::format(R"(
name: offload-rows
model: llama-3-8b
gpu: h200
engine: {{max_num_seqs: 8, max_model_len: 8193, allow_long_max_model_len: true,
  max_num_batched_tokens: 8193, kv: {{type: paged, block_size: 16, num_blocks: 600, enable_prefix_caching: true}}}}
workload:
  trace: {{path: {}, format: mooncake}}
policies:
  - name: gpu-only
    guards: []
  - name: tiers
    engine: {{kv_offloading: {{backend: native, size_gib: 1, disk: {{size_gib: 4}}}}}}
    guards: []
)",
                                         trace.string());
    const Scenario s =
        load_scenario(ConfigNode::parse_string(yaml, "test.yaml"), Catalog::builtin());
    RunOptions o;
    o.out_dir = (d / "out").string();
    o.timeline_path = (d / "timeline.json").string();
    o.check_invariants = true;  // stored - evicted = occupancy at every sample, too
    run_scenario(s, o);
    return d;
  }();
  return dir;
}

// A CSV file as rows of cells by column name.
std::vector<std::map<std::string, std::string>> tier_rows_csv(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, ',')) cells.push_back(c);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    if (header.empty()) {
      header = cells;
      continue;
    }
    REQUIRE(cells.size() == header.size());
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

// One iteration prefilling `tokens` after `context` cached ones, ns (the engine's clock).
SimTime tier_rows_iteration_ns(int64_t tokens, int64_t context) {
  const Catalog& c = Catalog::builtin();
  const GpuSpec& gpu = c.gpu("h200");
  const LatencyModel lm(c.model("llama-3-8b"), gpu, default_profile(gpu), AttentionKind::kFlash);
  BatchShape b;
  b.block_tokens = 16;
  b.prefill.push_back({.tokens = tokens, .context_tokens = context, .emits_token = true});
  return std::max<SimTime>(1, seconds_to_sim(lm.iteration(b).seconds));
}

// A cell of exact ns as the result files write it (9 decimals).
std::string tier_rows_seconds_9(SimTime ns) {
  return fmt::format("{}.{:09}", ns / kNsPerSecond, ns % kNsPerSecond);
}

const std::map<std::string, std::string>& tier_rows_at(
    const std::vector<std::map<std::string, std::string>>& rows, const std::string& policy,
    const std::string& t) {
  const auto f = std::find_if(rows.begin(), rows.end(), [&](const auto& r) {
    return r.at("policy") == policy && r.at("t_s") == t;
  });
  REQUIRE(f != rows.end());
  return *f;
}

}  // namespace

// At 1 s A has run: its prefill step stored its 512 blocks (1,073,741,824 bytes), the CPU
// tier's whole size, nothing evicted, the disk empty. At 6 s B has run: its store evicted A's
// 512 blocks from the CPU tier (1,024 stored, 512 evicted, 512 held) and they were written to
// disk (512 stored there). Every row: stored - evicted = blocks, bytes = blocks x 2,097,152;
// the policy without offloading leaves the cells empty.
TEST_CASE("timeseries.csv shows each tier's occupancy with its stores and evictions",
          "[engine][offload]") {
  const auto rows = tier_rows_csv(tier_rows_run() / "out" / "timeseries.csv");
  const auto& a = tier_rows_at(rows, "tiers", "1.000");
  CHECK(a.at("cpu_tier_blocks") == "512");
  CHECK(a.at("cpu_tier_bytes") == "1073741824");
  CHECK(a.at("cpu_tier_stored_blocks") == "512");
  CHECK(a.at("cpu_tier_evicted_blocks") == "0");
  CHECK(a.at("disk_tier_blocks") == "0");
  const auto& b = tier_rows_at(rows, "tiers", "6.000");
  CHECK(b.at("cpu_tier_blocks") == "512");
  CHECK(b.at("cpu_tier_stored_blocks") == "1024");
  CHECK(b.at("cpu_tier_evicted_blocks") == "512");
  CHECK(b.at("disk_tier_blocks") == "512");
  CHECK(b.at("disk_tier_bytes") == "1073741824");
  CHECK(b.at("disk_tier_stored_blocks") == "512");
  CHECK(b.at("disk_tier_evicted_blocks") == "0");
  int tiered = 0;
  for (const auto& r : rows) {
    for (const std::string tier : {"cpu_tier", "disk_tier"}) {
      if (r.at("policy") == "gpu-only") {
        CHECK(r.at(tier + "_blocks").empty());
        continue;
      }
      ++tiered;
      const int64_t blocks = std::stoll(r.at(tier + "_blocks"));
      CHECK(std::stoll(r.at(tier + "_stored_blocks")) -
                std::stoll(r.at(tier + "_evicted_blocks")) ==
            blocks);
      CHECK(std::stoll(r.at(tier + "_bytes")) == blocks * 2'097'152);
    }
  }
  CHECK(tiered >= 2 * 10);  // samples at 0..10 s at least
}

// Each request is scheduled as it arrives or as its load ends (the engine is idle then), so none
// queues. A and B prefill 8,192 tokens; without the tiers the repeat recomputes 6,784 tokens
// after its 1,408-token GPU hit; with them it reads blocks 88..510 from disk (100 us + 423 x
// 2,097,152 B / 7e9 B/s = 126,827,899 ns) and copies them over PCIe (887,095,296 B / 50e9 B/s =
// 17,741,906 ns): 144,569,805 ns loading, then prefills 16 tokens after 8,176.
TEST_CASE("requests.csv splits each TTFT into queueing, loading and prefill", "[engine][offload]") {
  const auto rows = tier_rows_csv(tier_rows_run() / "out" / "requests.csv");
  REQUIRE(rows.size() == 6);
  const auto split = [&](size_t i) {
    return std::vector<std::string>{rows[i].at("ttft_queueing_s"), rows[i].at("ttft_loading_s"),
                                    rows[i].at("ttft_prefill_s")};
  };
  const std::string zero = "0.000000000";
  const std::string first = tier_rows_seconds_9(tier_rows_iteration_ns(8192, 0));
  for (const size_t i : {0, 1, 3, 4}) {
    CHECK(split(i) == std::vector<std::string>{zero, zero, first});
  }
  CHECK(rows[2].at("policy") == "gpu-only");
  CHECK(split(2) == std::vector<std::string>{
                        zero, zero, tier_rows_seconds_9(tier_rows_iteration_ns(6784, 1408))});
  CHECK(rows[5].at("policy") == "tiers");
  CHECK(split(5) ==
        std::vector<std::string>{zero, "0.144569805",
                                 tier_rows_seconds_9(tier_rows_iteration_ns(16, 8176))});
}

// The timeline's "KV tier bytes" counter: on the tiers policy's track (pid 2) only; after A's
// step (its first iteration) the CPU tier holds A's 512 blocks and the disk nothing.
TEST_CASE("the timeline draws the tiers' occupancy as a counter", "[engine][offload]") {
  const std::string text = kvsim::test::file_text(tier_rows_run() / "timeline.json");
  CHECK(text.find(R"("name":"KV tier bytes","ph":"C")") != std::string::npos);
  CHECK(text.find(R"("pid":1,"tid":1,"args":{"gpu")") == std::string::npos);
  const size_t first = text.find(R"("name":"KV tier bytes")");
  REQUIRE(first != std::string::npos);
  const std::string event = text.substr(first, text.find('\n', first) - first);
  CHECK(event.find(R"("pid":2)") != std::string::npos);
  CHECK(event.find(R"("cpu":1073741824,"disk":0)") != std::string::npos);
}
