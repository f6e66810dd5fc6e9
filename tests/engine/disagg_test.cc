// Disaggregated prefill and decode (docs/cluster.md): one request worked out by hand through the
// latency model, and the configuration errors.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/errors.h"
#include "core/sim_time.h"
#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;
using kvsim::test::count;
using kvsim::test::run_yaml;

namespace {

const LatencyModel& h200_llama3() {
  static const LatencyModel lm = [] {
    const Catalog& c = Catalog::builtin();
    const GpuSpec& gpu = c.gpu("h200");
    return LatencyModel(c.model("llama-3-8b"), gpu, default_profile(gpu), AttentionKind::kFlash);
  }();
  return lm;
}

// One iteration as the engine times it: whole nanoseconds, at least 1.
SimTime rounded(const BatchShape& b) {
  return std::max<SimTime>(1, seconds_to_sim(h200_llama3().iteration(b).seconds));
}

SimTime prefill_ns(int64_t tokens) {
  BatchShape b;
  b.block_tokens = 16;
  b.prefill.push_back({.tokens = tokens, .context_tokens = 0, .emits_token = true});
  return rounded(b);
}

// One decode step of a lone request whose KV covers `context` tokens.
SimTime decode_ns(int64_t context) {
  BatchShape b;
  b.block_tokens = 16;
  b.decode_seqs = 1;
  b.decode_context_tokens = context;
  return rounded(b);
}

}  // namespace

// One request (1,000 prompt tokens, 4 output tokens) at t = 0 on one prefill and one decode
// H200 replica, link 10 GB/s with 50 us latency:
//   TTFT = the prefill iteration of 1,000 tokens on the prefill replica (it emits token 1);
//   transfer = 50e-6 + 1,000 x kv_bytes_per_token / 10e9 s (the prompt's KV; llama-3-8b:
//              32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 131,072 B/token);
//   then 3 decode steps on the decode replica with 1,001, 1,002, 1,003 tokens of context;
//   E2E = TTFT + transfer + the three steps, to the nanosecond.
TEST_CASE("a disaggregated request's TTFT and E2E are prefill + transfer + decode steps",
          "[engine][cluster][disagg]") {
  const RunResult r = run_yaml(R"(
name: disagg
model: llama-3-8b
gpu: h200
cluster:
  replicas:
    - {name: p, count: 1, role: prefill}
    - {name: d, count: 1, role: decode}
  kv_transfer: {gb_per_s: 10, latency_us: 50}
workload:
  arrivals: {type: fixed, rate: 1}
  max_requests: 1
  prompt_tokens: 1000
  output_tokens: 4
policies: [{name: pd, guards: []}]
)");
  const PolicySummary& p = r.policies.at(0);
  REQUIRE(p.cluster);
  CHECK(p.requests_total == 1);
  CHECK(count(p, Outcome::kCompleted) == 1);
  const int64_t kv_bytes = Catalog::builtin().model("llama-3-8b").kv_bytes_per_token();
  CHECK(kv_bytes == 131072);
  const SimTime ttft = prefill_ns(1000);
  const SimTime transfer = seconds_to_sim(50e-6 + 1000.0 * kv_bytes / 10e9);
  const SimTime e2e = ttft + transfer + decode_ns(1001) + decode_ns(1002) + decode_ns(1003);
  CHECK(p.ttft.mean == Approx(sim_to_seconds(ttft)).epsilon(1e-12));
  CHECK(p.e2e.mean == Approx(sim_to_seconds(e2e)).epsilon(1e-12));
  CHECK(p.cluster->kv_transfer.count == 1);
  CHECK(p.cluster->kv_transfer.mean == Approx(sim_to_seconds(transfer)).epsilon(1e-12));
  // Each side counts its half: the prefill replica a 1-token answer, the decode replica the rest.
  REQUIRE(p.cluster->replicas.size() == 2);
  CHECK(p.cluster->replicas[0].role == "prefill");
  CHECK(p.cluster->replicas[1].role == "decode");
  CHECK(p.cluster->replicas[0].requests_total == 1);
  CHECK(p.cluster->replicas[1].requests_total == 1);
}

// Both halves or neither: the error points at the `replicas:` list (line 5, column 5).
TEST_CASE("disaggregation errors point at the replica list", "[engine][cluster][disagg][errors]") {
  auto error_of = [](const std::string& groups, const std::string& extra = "") {
    const std::string yaml = "name: bad\nmodel: llama-3-8b\ngpu: h200\ncluster:\n  replicas: " + groups +
                             "\n" + extra +
                             "workload: {arrivals: {type: fixed, rate: 1}, max_requests: 1, "
                             "prompt_tokens: 10, output_tokens: 2}\npolicies: [{name: x, guards: []}]\n";
    try {
      const Scenario s = load_scenario(ConfigNode::parse_string(yaml, "bad.yaml"), Catalog::builtin());
      prepare_scenario(s, RunOptions{});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("[{name: p, role: prefill}]"),
             Catch::Contains("bad.yaml:5:13") && Catch::Contains("`decode` or `mixed`"));
  CHECK_THAT(error_of("[{name: d, role: decode}]"),
             Catch::Contains("bad.yaml:5:13") && Catch::Contains("`prefill` or `mixed`"));
  CHECK_THAT(error_of("[{name: p, role: prefill}, {name: d, role: decode}]",
                      "  kv_transfer: {gb_per_s: 0}\n"),
             Catch::Contains("bad.yaml:6:") && Catch::Contains("gb_per_s"));
  CHECK_THAT(error_of("[{name: p, role: prefill}, {name: d, role: decode}]",
                      "  kv_transfer: {gbps: 1}\n"),
             Catch::Contains("bad.yaml:6:") && Catch::Contains("gbps"));
  CHECK(error_of("[{name: p, role: prefill}, {name: m, role: mixed}]") == "no error");
}

// Back-pressure: the decode replica's paged pool has 70 blocks of 16 tokens (1,120 tokens); each
// request (1,000 prompt + 20 output tokens) needs 64 blocks, so only one fits. A arrives at 0,
// B at 1 ms (fixed rate 1,000/s), one prefill replica, link 10 GB/s + 50 us (X below):
//   prefill side: A's prefill [0, P]; B waits for it and prefills alone [P, 2P] (P: 1,000 tokens);
//   A reaches the decode replica at P + X and decodes 19 steps alone (contexts 1,001..1,019,
//     D in all): done at P + X + D;
//   B reaches it at 2P + X (< P + X + D since D > P, checked) but does not fit beside A: it
//     waits until A finishes, then decodes its 19 steps alone: done at P + X + 2D.
// So E2E(A) = P + X + D; E2E(B) = P + X + 2D - 1 ms; TTFT(A) = P, TTFT(B) = 2P - 1 ms.
TEST_CASE("a decode replica out of KV holds a transferred request back until one finishes",
          "[engine][cluster][disagg]") {
  const RunResult r = run_yaml(R"(
name: backpressure
model: llama-3-8b
gpu: h200
cluster:
  replicas:
    - {name: p, count: 1, role: prefill}
    - {name: d, count: 1, role: decode, engine: {kv: {type: paged, block_size: 16, num_blocks: 70}}}
  kv_transfer: {gb_per_s: 10, latency_us: 50}
workload:
  arrivals: {type: fixed, rate: 1000}
  max_requests: 2
  prompt_tokens: 1000
  output_tokens: 20
policies: [{name: pd, guards: []}]
)");
  const PolicySummary& p = r.policies.at(0);
  REQUIRE(p.cluster);
  CHECK(count(p, Outcome::kCompleted) == 2);
  const int64_t kv_bytes = Catalog::builtin().model("llama-3-8b").kv_bytes_per_token();
  const double P = sim_to_seconds(prefill_ns(1000));
  const double X = sim_to_seconds(seconds_to_sim(50e-6 + 1000.0 * kv_bytes / 10e9));
  SimTime d_ns = 0;
  for (int64_t c = 1001; c <= 1019; ++c) d_ns += decode_ns(c);
  const double D = sim_to_seconds(d_ns);
  REQUIRE(D > P);  // B arrives at the decode side while A still decodes
  const double a = P + X + D, b = P + X + 2 * D - 0.001;
  CHECK(p.e2e.count == 2);
  CHECK(p.e2e.mean == Approx((a + b) / 2).epsilon(1e-9));
  CHECK(p.e2e.p90 == Approx(a + 0.9 * (b - a)).epsilon(1e-9));
  CHECK(p.ttft.mean == Approx((P + 2 * P - 0.001) / 2).epsilon(1e-9));
  CHECK(p.preemptions == 0);
}
