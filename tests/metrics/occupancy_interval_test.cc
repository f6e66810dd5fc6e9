// KV pool occupancy's time-weighted mean is taken over the interval its integral covers. A
// prefill replica of a disaggregated cluster holds a request's KV after that request's outcome
// (its first token) until the transfer ends: divided by [first arrival, last outcome] alone, the
// mean rose above its own peak (0.695 against 0.223 on a 0.05 GB/s link) and above 1 (548.9 at
// latency_us 1e9).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "core/errors.h"
#include "sim/metrics/recorder.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;
using kvsim::test::count;
using kvsim::test::run_yaml;

namespace {

// One prefill and one decode H200 replica of llama-3-8b, fixed arrivals of 1,000-token prompts
// with 4 output tokens, a link of `gb_per_s` and `latency_us`.
RunResult run_link(double gb_per_s, double latency_us, int requests) {
  return run_yaml(fmt::format(R"(
name: occupancy
model: llama-3-8b
gpu: h200
cluster:
  replicas:
    - {{name: p, count: 1, role: prefill}}
    - {{name: d, count: 1, role: decode}}
  kv_transfer: {{gb_per_s: {}, latency_us: {}}}
workload:
  arrivals: {{type: fixed, rate: 10}}
  max_requests: {}
  prompt_tokens: 1000
  output_tokens: 4
policies: [{{name: pd, guards: []}}]
)",
                              gb_per_s, latency_us, requests));
}

}  // namespace

// One request. Both replicas hold its KV in 63 blocks of 16 tokens (1,000 prompt tokens, then up
// to 1,003 with the decoded ones: 1,008 slots), a constant figure while they hold it:
//   prefill replica: from its prefill at t = 0 to the end of the transfer, P + X;
//   decode replica: from the transfer's start (P) to the last token, P + X + D3.
// Over the interval each holds it, the mean equals the peak. The prefill replica's outcome is
// at P, and X = 50e-6 + 1,000 x 131,072 B / 0.05e9 = 2.62149 s is far longer than P: over [0, P]
// the old mean was (P + X) / P times the peak.
TEST_CASE("a prefill replica's mean KV occupancy covers the transfer after its outcome",
          "[engine][cluster][disagg][occupancy]") {
  const RunResult r = run_link(0.05, 50, 1);
  const PolicySummary& p = r.policies.at(0);
  REQUIRE(p.cluster);
  REQUIRE(count(p, Outcome::kCompleted) == 1);
  REQUIRE(p.cluster->replicas.size() == 2);
  const ReplicaSummary& pre = p.cluster->replicas[0];
  const ReplicaSummary& dec = p.cluster->replicas[1];
  REQUIRE(pre.role == "prefill");
  REQUIRE(p.cluster->kv_transfer.mean == Approx(2.62149).epsilon(1e-9));
  CHECK(pre.kv_pool_peak_occupancy > 0);
  CHECK(pre.kv_pool_mean_occupancy == Approx(pre.kv_pool_peak_occupancy).epsilon(1e-12));
  CHECK(dec.kv_pool_peak_occupancy > 0);
  CHECK(dec.kv_pool_mean_occupancy == Approx(dec.kv_pool_peak_occupancy).epsilon(1e-12));
  CHECK(p.kv_pool_mean_occupancy <= p.kv_pool_peak_occupancy);
}

TEST_CASE("KV occupancy stays 0 <= mean <= peak <= 1 on any link",
          "[engine][cluster][disagg][occupancy]") {
  // A link of 1,000 s latency (latency_us 1e9) printed "KV mean 54886.7%". Several requests, so
  // transfers queue and the replicas' KV comes and goes.
  for (const auto& [gb, us] : {std::pair{0.05, 50.0}, {25.0, 1e9}, {1.0, 20.0}}) {
    INFO("link " << gb << " GB/s, " << us << " us");
    const RunResult r = run_link(gb, us, 8);  // check_invariants on: check_occupancy runs too
    const PolicySummary& p = r.policies.at(0);
    REQUIRE(p.cluster);
    for (const ReplicaSummary& rep : p.cluster->replicas) {
      INFO(rep.label);
      CHECK(rep.kv_pool_mean_occupancy >= 0);
      CHECK(rep.kv_pool_mean_occupancy <= rep.kv_pool_peak_occupancy);
      CHECK(rep.kv_pool_peak_occupancy <= 1);
    }
    CHECK(p.kv_pool_mean_occupancy <= p.kv_pool_peak_occupancy);
  }
}

TEST_CASE("checking mode rejects occupancy figures out of order", "[engine][occupancy]") {
  PolicySummary s;
  s.name = "x";
  s.kv_pool_peak_occupancy = 0.223;
  s.kv_pool_mean_occupancy = 0.2;
  CHECK_NOTHROW(check_occupancy(s));
  s.kv_pool_mean_occupancy = 0.695;
  CHECK_THROWS_AS(check_occupancy(s), InvariantError);
  s.kv_pool_mean_occupancy = 0.2;
  s.cluster = ClusterSummary{};
  s.cluster->replicas.push_back(ReplicaSummary{
      .label = "prefill-0", .kv_pool_peak_occupancy = 0.5, .kv_pool_mean_occupancy = 548.9});
  CHECK_THROWS_WITH(check_occupancy(s), Catch::Contains("policy x, replica prefill-0"));
  s.cluster->replicas.back().kv_pool_mean_occupancy = 0.5;  // equal: allowed
  CHECK_NOTHROW(check_occupancy(s));
  s.cluster->replicas.back().kv_pool_peak_occupancy = 1.5;
  s.cluster->replicas.back().kv_pool_mean_occupancy = 1.2;
  CHECK_THROWS_AS(check_occupancy(s), InvariantError);
}
