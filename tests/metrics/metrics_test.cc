// The memory snapshot at the moment of peak use against each
// category's own peak, KV pool occupancy, SLO attainment and goodput, and requests.csv in id
// order. The Recorder is fed hand-made states and requests, so every figure is worked out below.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "sim/metrics/summary_writer.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;

namespace {

namespace fs = std::filesystem;

SimTime metrics_at_s(double s) { return seconds_to_sim(s); }

// A 100-byte GPU: context 10, weights 30, a preallocated KV pool of 40, and 20 more bytes that
// activations take from `free`.
MemorySnapshot metrics_state(int64_t act, int64_t live, int64_t waste) {
  MemorySnapshot s;
  s.capacity_bytes = 100;
  s.context_bytes = 10;
  s.weights_bytes = 30;
  s.activation_bytes = act;
  s.kv_live_bytes = live;
  s.kv_waste_bytes = waste;
  s.kv_internal_bytes = waste;  // all of it internal (the split does not matter here)
  s.kv_free_bytes = 40 - live - waste;
  s.free_bytes = 20 - act;
  s.check();
  return s;
}

RequestState metrics_request(int64_t id, double arrival, double first_token, double finished,
                             int64_t generated, Outcome outcome) {
  RequestState r;
  r.spec.id = id;
  r.spec.arrival = metrics_at_s(arrival);
  r.spec.prompt_tokens = 10;
  r.spec.output_tokens = generated;
  r.prompt_tokens = 10;
  r.generated = generated;
  r.first_token_at = first_token < 0 ? -1 : metrics_at_s(first_token);
  r.finished_at = metrics_at_s(finished);
  r.outcome = outcome;
  return r;
}

std::string metrics_read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream b;
  b << in.rdbuf();
  return b.str();
}

}  // namespace

// One request (arrives at 0 s, first token at 1 s, done at 4 s). In-use bytes = capacity - free
// - kv_free - allocator_cache:
//   t=0 s  act 0,  live 0,  waste 0   in use 10+30        = 40
//   t=1 s  act 15, live 10, waste 2   in use 40+15+10+2   = 67   (activations' own peak)
//   t=2 s  act 0,  live 30, waste 4   in use 40+30+4      = 74   (the peak moment)
//   t=4 s  act 0,  live 0,  waste 0   in use              = 40
// The snapshot is t=2 s's: 10, 30, 0, 0, 30, 4, 6, 0, 20 (sums to 100). The category peaks are
// context 10, weights 30, activations 15 (t=1), kv_live 30, kv_waste 4, kv_free 40 (t=0),
// free 20 (t=0): 149 bytes on a 100-byte GPU, a report of "148 GB on 80 GB" in small.
// KV occupancy over the pool of 40: held (live + waste) is 0, 12, 34, 0 from t = 0, 1, 2, 4:
// peak 34/40 = 0.85; mean (12 x 1 s + 34 x 2 s) / (40 x 4 s duration) = 80/160 = 0.5.
TEST_CASE("the peak snapshot is one instant, unlike category peaks, and KV occupancy by hand",
          "[engine][metrics]") {
  Recorder rec("p");
  rec.set_kv_pool_bytes(40);
  rec.on_arrival(metrics_at_s(0));
  rec.on_state(metrics_at_s(0), metrics_state(0, 0, 0));
  rec.on_state(metrics_at_s(1), metrics_state(15, 10, 2));
  rec.on_state(metrics_at_s(2), metrics_state(0, 30, 4));
  rec.on_outcome(metrics_request(0, 0, 1, 4, 4, Outcome::kCompleted));
  rec.on_state(metrics_at_s(4), metrics_state(0, 0, 0));
  const PolicySummary s = rec.finish(metrics_at_s(4));

  CHECK(s.peak_in_use_bytes == 74);
  CHECK(s.peak_snapshot_t_s == 2.0);
  const std::array<int64_t, kMemCategoryCount> snap{10, 30, 0, 0, 30, 4, 6, 0, 20};
  CHECK(s.peak_snapshot_bytes == snap);
  int64_t snap_sum = 0;
  for (int64_t b : s.peak_snapshot_bytes) snap_sum += b;
  CHECK(snap_sum == 100);
  const std::array<int64_t, kMemCategoryCount> peaks{10, 30, 0, 15, 30, 4, 40, 0, 20};
  CHECK(s.category_peaks_bytes == peaks);
  int64_t peak_sum = 0;
  for (int64_t b : s.category_peaks_bytes) peak_sum += b;
  CHECK(peak_sum == 149);

  CHECK(s.duration_s == 4.0);
  CHECK(s.kv_pool_bytes == 40);
  CHECK(s.kv_pool_peak_occupancy == Approx(0.85).epsilon(1e-12));
  CHECK(s.kv_pool_mean_occupancy == Approx(0.5).epsilon(1e-12));
  CHECK_FALSE(s.slo.has_value());  // no SLO given: no SLO figures

  const auto j = summary_json({s})["policies"][0];
  CHECK(j["peak_snapshot"]["in_use_bytes"] == 74);
  CHECK(j["peak_snapshot"]["bytes"]["kv_free"] == 6);
  CHECK(j["category_peaks_bytes"]["activations"] == 15);
  CHECK_FALSE(j.contains("peak_memory_bytes"));  // renamed: it never was one instant
  CHECK(j["slo"].is_null());
  CHECK(j["slo_attainment"].is_null());
  const std::string csv = summary_csv({s});
  CHECK(csv.find(",74,0.850000,0.500000,,,\n") != std::string::npos);  // empty SLO cells
  CHECK(summary_table({s}).find("85.0%") != std::string::npos);
}

// SLO ttft_s 1, tpot_s 0.5 over four requests (TPOT = (e2e - ttft) / (generated - 1)):
//   0: arrives 0.0, first token 0.5, done 2.0, 4 tokens: TTFT 0.5, TPOT 1.5/3 = 0.5  -> met (<=)
//   1: arrives 1.0, first token 3.0, done 5.0, 3 tokens: TTFT 2.0 > 1                  -> missed
//   2: arrives 2.0, first token 2.8, done 3.8, 5 tokens: TTFT 0.8, TPOT 1.0/4 = 0.25   -> met
//   3: arrives 3.0, first token 3.2, done 3.5, 2 tokens, completed_truncated: within the bounds
//      but a cut prompt's answer, so not counted.
// Duration 0.0 -> 5.0 = 5 s. Attainment 2/4 = 0.5; goodput 2/5 = 0.4 requests/s and
// (4 + 5)/5 = 1.8 tokens/s. requests.csv gets them as they finish (0, 3, 2, 1) but in id order.
TEST_CASE("SLO attainment and goodput by hand, and requests.csv in id order", "[engine][metrics]") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("kvsim-metrics-test-{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  AtomicFile requests(dir / "requests.csv");
  Recorder rec("p");
  rec.stream_to(&requests, nullptr);
  rec.set_slo(SloBounds{.ttft_s = 1.0, .tpot_s = 0.5});
  for (double a : {0.0, 1.0, 2.0, 3.0}) rec.on_arrival(metrics_at_s(a));
  rec.on_outcome(metrics_request(0, 0.0, 0.5, 2.0, 4, Outcome::kCompleted));
  rec.on_outcome(metrics_request(3, 3.0, 3.2, 3.5, 2, Outcome::kCompletedTruncated));
  rec.on_outcome(metrics_request(2, 2.0, 2.8, 3.8, 5, Outcome::kCompleted));
  rec.on_outcome(metrics_request(1, 1.0, 3.0, 5.0, 3, Outcome::kCompleted));
  const PolicySummary s = rec.finish(metrics_at_s(5));
  requests.commit();

  CHECK(s.duration_s == 5.0);
  CHECK(s.slo_met == 2);
  CHECK(s.slo_attainment == 0.5);
  CHECK(s.slo_goodput_requests_per_s == Approx(0.4).epsilon(1e-12));
  CHECK(s.slo_goodput_tokens_per_s == Approx(1.8).epsilon(1e-12));

  const auto j = summary_json({s})["policies"][0];
  CHECK(j["slo"]["ttft_s"] == 1.0);
  CHECK(j["slo"]["e2e_s"].is_null());  // not bounded
  CHECK(j["slo_attainment"] == 0.5);
  CHECK(summary_csv({s}).find(",0.500000,0.400000,1.800000\n") != std::string::npos);

  std::istringstream rows(metrics_read_file(dir / "requests.csv"));
  std::string line;
  std::vector<std::string> ids;
  while (std::getline(rows, line)) ids.push_back(line.substr(0, line.find(',', 2)));
  CHECK(ids == std::vector<std::string>{"p,0", "p,1", "p,2", "p,3"});
  fs::remove_all(dir);
}

TEST_CASE("a one-token request meets any TPOT bound, an empty SLO meets all", "[engine][metrics]") {
  // vLLM's benchmark scores a one-token answer's TPOT as 0: it meets any TPOT bound.
  const SloBounds b{.tpot_s = 0.01};
  CHECK(b.met(5.0, std::nullopt, 5.0));
  CHECK_FALSE(b.met(5.0, 0.02, 5.0));
  CHECK(SloBounds{}.met(100, 100, 100));
}

namespace {

std::string slo_scenario(const std::string& top, const std::string& policy_slo) {
  return fmt::format(R"(
name: slo
model: llama-3-8b
gpu: a100-sxm4-80gb
engine: {{kv: {{type: paged, block_size: 16, num_blocks: 1000}}}}
{}
workload:
  arrivals: {{type: fixed, rate: 10}}
  max_requests: 4
  prompt_tokens: 100
  output_tokens: 10
policies:
  - {{name: a, guards: []}}
  - {{name: b, guards: []{}}}
)",
                     top, policy_slo);
}

}  // namespace

// Top level ttft_s 2, tpot_s 0.1; policy b overrides tpot_s with 0.5 and keeps ttft_s 2.
// Pool: 1000 blocks x 16 tokens x 131,072 B/token (llama-3-8b: 32 layers x 8 KV heads x 128 x 2
// x 2 B) = 2,097,152,000 B.
TEST_CASE("a top-level slo is merged per policy, and a paged pool is its blocks",
          "[engine][metrics]") {
  const RunResult r =
      kvsim::test::run_yaml(slo_scenario("slo: {ttft_s: 2, tpot_s: 0.1}", ", slo: {tpot_s: 0.5}"));
  const PolicySummary& a = r.policies.at(0);
  const PolicySummary& b = r.policies.at(1);
  REQUIRE(a.slo.has_value());
  REQUIRE(b.slo.has_value());
  CHECK(*a.slo->ttft_s == 2.0);
  CHECK(*a.slo->tpot_s == 0.1);
  CHECK(*b.slo->ttft_s == 2.0);
  CHECK(*b.slo->tpot_s == 0.5);
  CHECK_FALSE(b.slo->e2e_s.has_value());
  CHECK(a.kv_pool_bytes == 2'097'152'000);
  CHECK(a.kv_pool_peak_occupancy > 0);
  CHECK(a.kv_pool_mean_occupancy > 0);
  CHECK(a.kv_pool_mean_occupancy <= a.kv_pool_peak_occupancy);
  CHECK(a.kv_pool_peak_occupancy <= 1.0);
}

TEST_CASE("a bad slo block is an error naming its position", "[engine][metrics]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(kvsim::test::run_yaml(slo_scenario("slo: {ttft_s: -1}", "")),
                    Contains("test.yaml:6:") && Contains("ttft_s"));
  CHECK_THROWS_WITH(kvsim::test::run_yaml(slo_scenario("slo: {ttft: 1}", "")),
                    Contains("test.yaml:6:") && Contains("ttft_s"));  // did you mean
  CHECK_THROWS_WITH(kvsim::test::run_yaml(slo_scenario("", ", slo: 3")),
                    Contains("test.yaml:14:") && Contains("SLO bounds"));
}
