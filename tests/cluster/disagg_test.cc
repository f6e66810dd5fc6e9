// Disaggregated prefill and decode (docs/cluster.md): one request worked out by hand through the
// latency model, and the configuration errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "core/sim_time.h"
#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "sim/metrics/summary_writer.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;
using kvsim::test::count;
using kvsim::test::iteration_ns;
using kvsim::test::prepare_error;
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

// The prefill of a lone `tokens`-token prompt (it emits the first token), as the engine times it.
SimTime prefill_ns(int64_t tokens) {
  BatchShape b;
  b.block_tokens = 16;
  b.prefill.push_back({.tokens = tokens, .context_tokens = 0, .emits_token = true});
  return iteration_ns(h200_llama3(), b);
}

// One decode step of a lone request whose KV covers `context` tokens.
SimTime decode_ns(int64_t context) {
  BatchShape b;
  b.block_tokens = 16;
  b.decode_seqs = 1;
  b.decode_context_tokens = context;
  return iteration_ns(h200_llama3(), b);
}

// The KV transfer of a `tokens`-token prompt of llama-3-8b over a link of `gb_per_s` GB/s and
// 50 us latency: 50e-6 + tokens x kv_bytes_per_token / (gb_per_s x 1e9) s, in whole nanoseconds.
SimTime transfer_ns(int64_t tokens, int gb_per_s) {
  const int64_t kv_bytes = Catalog::builtin().model("llama-3-8b").kv_bytes_per_token();
  return seconds_to_sim(50e-6 + static_cast<double>(tokens) * kv_bytes / (gb_per_s * 1e9));
}

// The runs worked out by hand below: one prefill and one decode H200 replica of llama-3-8b, a
// link with 50 us latency, fixed arrivals of 1,000-token prompts from t = 0.
struct DisaggRun {
  const char* name;
  int gb_per_s;  // the link's bandwidth
  int rate;      // arrivals per second
  int max_requests;
  int output_tokens;
  // What each replica's entry adds to its name, count and role (e.g. its own engine section).
  const char* prefill_extra = "";
  const char* decode_extra = "";
};

RunResult run_disagg(const DisaggRun& d) {
  return run_yaml(fmt::format(R"(
name: {}
model: llama-3-8b
gpu: h200
cluster:
  replicas:
    - {{name: p, count: 1, role: prefill{}}}
    - {{name: d, count: 1, role: decode{}}}
  kv_transfer: {{gb_per_s: {}, latency_us: 50}}
workload:
  arrivals: {{type: fixed, rate: {}}}
  max_requests: {}
  prompt_tokens: 1000
  output_tokens: {}
policies: [{{name: pd, guards: []}}]
)",
                              d.name, d.prefill_extra, d.decode_extra, d.gb_per_s, d.rate,
                              d.max_requests, d.output_tokens));
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
  const RunResult r = run_disagg(
      {.name = "disagg", .gb_per_s = 10, .rate = 1, .max_requests = 1, .output_tokens = 4});
  const PolicySummary& p = r.policies.at(0);
  REQUIRE(p.cluster);
  CHECK(p.requests_total == 1);
  CHECK(count(p, Outcome::kCompleted) == 1);
  const int64_t kv_bytes = Catalog::builtin().model("llama-3-8b").kv_bytes_per_token();
  CHECK(kv_bytes == 131072);
  const SimTime ttft = prefill_ns(1000);
  const SimTime transfer = transfer_ns(1000, 10);
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
    const std::string yaml =
        "name: bad\nmodel: llama-3-8b\ngpu: h200\ncluster:\n  replicas: " + groups + "\n" + extra +
        "workload: {arrivals: {type: fixed, rate: 1}, max_requests: 1, "
        "prompt_tokens: 10, output_tokens: 2}\npolicies: [{name: x, guards: []}]\n";
    return prepare_error(yaml);
  };
  CHECK_THAT(error_of("[{name: p, role: prefill}]"),
             Catch::Contains("bad.yaml:5:13") && Catch::Contains("`decode` or `mixed`"));
  CHECK_THAT(error_of("[{name: d, role: decode}]"),
             Catch::Contains("bad.yaml:5:13") && Catch::Contains("`prefill` or `mixed`"));
  CHECK_THAT(error_of("[{name: p, role: prefill}, {name: d, role: decode}]",
                      "  kv_transfer: {gb_per_s: 0}\n"),
             Catch::Contains("bad.yaml:6:") && Catch::Contains("gb_per_s"));
  CHECK_THAT(
      error_of("[{name: p, role: prefill}, {name: d, role: decode}]", "  kv_transfer: {gbps: 1}\n"),
      Catch::Contains("bad.yaml:6:") && Catch::Contains("gbps"));
  CHECK(error_of("[{name: p, role: prefill}, {name: m, role: mixed}]") == "no error");
}

// The link is one FIFO server per prefill replica. A at 0 and B at 1 ms (1,000 prompt and 4 output
// tokens each), one prefill and one decode H200 (the decode pool holds both), link 1 GB/s + 50 us:
// X = 50e-6 + 1,000 x 131,072 B / 1e9 = 131.122 ms, longer than the prefill P (checked).
//   prefill side: A's prefill [0, P]; B waits for it and prefills alone [P, 2P];
//   A's transfer [P, P + X] (the decode replica allocates at once: it is idle);
//   B's first token at 2P < P + X: the decode side allocates at once, but the link is busy
//     until P + X: B's transfer [P + X, P + 2X], right behind A's;
//   A decodes its 3 steps (contexts 1,001..1,003, D3 in all) from P + X, done at
//     P + X + D3 < P + 2X (checked): B decodes alone from P + 2X, done at P + 2X + D3.
// So TTFT(A) = P, TTFT(B) = 2P - 1 ms; E2E(A) = P + X + D3, E2E(B) = P + 2X + D3 - 1 ms;
// transfer times X and X; waits (first token to transfer start) 0 and P + X - 2P = X - P.
TEST_CASE("transfers from one prefill replica queue on its link", "[engine][cluster][disagg]") {
  const RunResult r = run_disagg(
      {.name = "link", .gb_per_s = 1, .rate = 1000, .max_requests = 2, .output_tokens = 4});
  const PolicySummary& p = r.policies.at(0);
  REQUIRE(p.cluster);
  CHECK(count(p, Outcome::kCompleted) == 2);
  const double P = sim_to_seconds(prefill_ns(1000));
  const double X = sim_to_seconds(transfer_ns(1000, 1));
  CHECK(X == Approx(0.131122).epsilon(1e-12));
  const double D3 = sim_to_seconds(decode_ns(1001) + decode_ns(1002) + decode_ns(1003));
  REQUIRE(2 * P < P + X);           // B's first token comes while A's transfer runs
  REQUIRE(P + X + D3 < P + 2 * X);  // A is done before B arrives on the decode side
  const double a = P + X + D3, b = P + 2 * X + D3 - 0.001;
  CHECK(p.e2e.count == 2);
  CHECK(p.e2e.mean == Approx((a + b) / 2).epsilon(1e-9));
  CHECK(p.e2e.p90 == Approx(a + 0.9 * (b - a)).epsilon(1e-9));
  CHECK(p.ttft.mean == Approx((P + 2 * P - 0.001) / 2).epsilon(1e-9));
  CHECK(p.ttft.p90 == Approx(P + 0.9 * (P - 0.001)).epsilon(1e-9));
  CHECK(p.cluster->kv_transfer.count == 2);
  CHECK(p.cluster->kv_transfer.mean == Approx(X).epsilon(1e-9));
  CHECK(p.cluster->kv_transfer_wait.count == 2);
  CHECK(p.cluster->kv_transfer_wait.mean == Approx((X - P) / 2).epsilon(1e-9));
  CHECK(p.cluster->kv_transfer_wait.p90 == Approx(0.9 * (X - P)).epsilon(1e-9));
}

// Back-pressure, with the KV held on both sides (DistServe's pull). Paged pools of 16-token
// blocks: the prefill replica's has 126 blocks, two prompts' worth (1,000 tokens = 63 blocks
// each); the decode replica's has 70, one request's worth (1,000 + 20 tokens = 64 blocks; a
// second's 63 do not fit beside it). A, B, C arrive at 0, 1 and 2 ms (1,000 prompt, 20 output
// tokens each), link 1 GB/s + 50 us (X = 131.122 ms), prefill of 1,000 tokens P < X, and D = the
// 19 decode steps of a lone request (contexts 1,001..1,019) > P (both checked):
//   P: A's prefill [0, P]; at P, B is admitted (63 blocks left) but C is not (none left beside
//      A's and B's): B prefills alone [P, 2P];
//   A: first token at P, held on P; the decode side allocates at P: transfer [P, P + X];
//   B: first token at 2P < P + X, held on P (A's KV still there too: P's pool is full, 126 of
//      126 blocks); the decode side cannot hold it beside A: B waits on P holding its KV;
//   C: admitted only when A's transfer ends and frees its blocks on P, at P + X: prefill
//      [P + X, 2P + X]; first token at 2P + X, held on P; waits behind B on the decode side;
//   A decodes alone [P + X, P + X + D]; when it finishes, the decode side allocates B: B's
//      transfer [P + X + D, P + 2X + D], decode [P + 2X + D, P + 2X + 2D]; then C the same
//      way: transfer from P + 2X + 2D, done at P + 3X + 3D.
// TTFT: A P, B 2P - 1 ms, C 2P + X - 2 ms. E2E: A P + X + D, B P + 2X + 2D - 1 ms,
// C P + 3X + 3D - 2 ms. Waits: A 0, B X + D - P, C X + 2D - P.
TEST_CASE("a full decode pool holds requests and their KV on the prefill replica",
          "[engine][cluster][disagg]") {
  const RunResult r =
      run_disagg({.name = "backpressure",
                  .gb_per_s = 1,
                  .rate = 1000,
                  .max_requests = 3,
                  .output_tokens = 20,
                  .prefill_extra = ", engine: {kv: {type: paged, block_size: 16, num_blocks: 126}}",
                  .decode_extra = ", engine: {kv: {type: paged, block_size: 16, num_blocks: 70}}"});
  const PolicySummary& p = r.policies.at(0);
  REQUIRE(p.cluster);
  CHECK(count(p, Outcome::kCompleted) == 3);
  const double P = sim_to_seconds(prefill_ns(1000));
  const double X = sim_to_seconds(transfer_ns(1000, 1));
  SimTime d_ns = 0;
  for (int64_t c = 1001; c <= 1019; ++c) d_ns += decode_ns(c);
  const double D = sim_to_seconds(d_ns);
  REQUIRE(P < X);  // A's KV is still on the prefill replica when B's prefill ends
  REQUIRE(P < D);  // C's first token comes while A still decodes
  const double ttft[] = {P, 2 * P - 0.001, 2 * P + X - 0.002};
  const double e2e[] = {P + X + D, P + 2 * X + 2 * D - 0.001, P + 3 * X + 3 * D - 0.002};
  const double wait[] = {0, X + D - P, X + 2 * D - P};
  // Three samples, sorted: the mean, and p50 = the middle one (linear interpolation).
  CHECK(p.ttft.mean == Approx((ttft[0] + ttft[1] + ttft[2]) / 3).epsilon(1e-9));
  CHECK(p.ttft.p50 == Approx(ttft[1]).epsilon(1e-9));
  CHECK(p.e2e.mean == Approx((e2e[0] + e2e[1] + e2e[2]) / 3).epsilon(1e-9));
  CHECK(p.e2e.p50 == Approx(e2e[1]).epsilon(1e-9));
  CHECK(p.cluster->kv_transfer.count == 3);
  CHECK(p.cluster->kv_transfer.mean == Approx(X).epsilon(1e-9));
  CHECK(p.cluster->kv_transfer_wait.mean ==
        Approx((wait[0] + wait[1] + wait[2]) / 3).epsilon(1e-9));
  CHECK(p.cluster->kv_transfer_wait.p50 == Approx(wait[1]).epsilon(1e-9));
  CHECK(p.preemptions == 0);
  // The prefill replica held A's and B's KV at once: its whole pool of 126 blocks.
  REQUIRE(p.cluster->replicas.size() == 2);
  CHECK(p.cluster->replicas[0].kv_pool_peak_occupancy == Approx(1.0).epsilon(1e-12));
  // The decode replica never held more than one request: 64 of 70 blocks at its peak.
  CHECK(p.cluster->replicas[1].kv_pool_peak_occupancy == Approx(64.0 / 70).epsilon(1e-12));
}

// summary.csv of a cluster run: a last `replica` column, `all` on the policy's totals row, then a
// row per replica. Two mixed replicas, round robin, 4 requests at 1/s: requests 0 and 2 go to
// m-0, 1 and 3 to m-1, so each row counts 2 requests and 2 completions, and the totals row 4 and
// 4: the replica rows add up to it. Every row has the header's number of cells.
TEST_CASE("summary.csv has a row per replica that adds up to the cluster's",
          "[engine][cluster][summary]") {
  const RunResult r = run_yaml(R"(
name: rows
model: llama-3-8b
gpu: h200
cluster:
  replicas: [{name: m, count: 2}]
  router: {type: round_robin}
workload:
  arrivals: {type: fixed, rate: 1}
  max_requests: 4
  prompt_tokens: 100
  output_tokens: 4
policies: [{name: rr, guards: []}]
)");
  auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    size_t start = 0;
    while (true) {
      const size_t comma = line.find(',', start);
      cells.push_back(line.substr(start, comma - start));
      if (comma == std::string::npos) return cells;
      start = comma + 1;
    }
  };
  const std::string csv = summary_csv(r.policies);
  std::vector<std::vector<std::string>> rows;
  for (size_t at = 0; at < csv.size();) {
    const size_t eol = csv.find('\n', at);
    rows.push_back(split(csv.substr(at, eol - at)));
    at = eol + 1;
  }
  REQUIRE(rows.size() == 4);  // header, totals, m-0, m-1
  const std::vector<std::string>& header = rows[0];
  CHECK(header.back() == "replica");
  for (const auto& row : rows) CHECK(row.size() == header.size());
  CHECK(rows[1].back() == "all");
  CHECK(rows[2].back() == "m-0");
  CHECK(rows[3].back() == "m-1");
  auto col = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  for (const char* name : {"requests_total", "completed"}) {
    const size_t c = col(name);
    REQUIRE(c < header.size());
    CHECK(rows[1][c] == "4");
    CHECK(rows[2][c] == "2");
    CHECK(rows[3][c] == "2");
  }
  // Every count column adds up (the other outcomes are 0 everywhere).
  for (size_t c = 1; c <= 1 + kFinalOutcomes.size(); ++c) {
    CHECK(std::stoll(rows[2][c]) + std::stoll(rows[3][c]) == std::stoll(rows[1][c]));
  }
  CHECK(rows[2][col("oom_events")] == "0");
  CHECK(rows[2][col("availability")].empty());  // a figure only the totals have
  // Without a cluster, no `replica` column.
  const RunResult single = run_yaml(R"(
name: one
model: llama-3-8b
gpu: h200
workload: {arrivals: {type: fixed, rate: 1}, max_requests: 1, prompt_tokens: 10, output_tokens: 2}
policies: [{name: x, guards: []}]
)");
  const std::string one = summary_csv(single.policies);
  CHECK(one.find("replica") == std::string::npos);
  CHECK(std::count(one.begin(), one.end(), '\n') == 2);
}

// Random disaggregated clusters in checking mode (pool and bookkeeping invariants after every
// iteration, KV held during transfers included): small GPUs, so pools fill, prefill replicas
// stall on held KV, replicas crash or abort on OOMs with transfers in flight. Every request ends
// once: each replica's outcomes add up to its requests, the totals' to the requests, and the
// run ends with no hand-off or transfer left (Cluster::finish checks).
TEST_CASE("random disaggregated clusters account for every request", "[property][engine][disagg]") {
  const uint64_t seed = GENERATE(range(0, 24));
  std::mt19937_64 g(seed ^ 0xd15a);
  auto pick = [&](std::initializer_list<const char*> xs) {
    return *(xs.begin() + static_cast<long>(g() % xs.size()));
  };
  const char* kv = pick({"{type: paged, block_size: 16}", "{type: paged, block_size: 32}",
                         "{type: contiguous, reserve: prompt_plus_max_new}",
                         "{type: caching_allocator, growth: chunked, chunk_tokens: 512}"});
  const std::string mixed = g() % 3 == 0 ? ", {name: m, count: 1}" : "";
  const std::string yaml = fmt::format(
      R"(
name: random-disagg-{}
seed: {}
model: llama-3-8b
gpu: {{name: g, memory_gb: {}, hbm_gb_per_s: 1000, fp16_tflops: 200}}
engine:
  chunked_prefill: {}
  preemption: {}
  on_oom: {}
  restart_s: 2
  kv: {}
cluster:
  replicas: [{{name: p, count: {}, role: prefill}}, {{name: d, count: {}, role: decode}}{}]
  router: {{type: {}}}
  kv_transfer: {{gb_per_s: {}, latency_us: 20}}
workload:
  arrivals: {{type: poisson, rate: {}}}
  max_requests: 40
  prompt_tokens: {{type: uniform, min: 16, max: 6000}}
  output_tokens: {{type: uniform, min: 1, max: 300}}
policies: [{{name: p, guards: []}}]
)",
      seed, seed, pick({"24", "28", "40"}), pick({"true", "false"}),
      pick({"recompute", "swap", "off"}), pick({"crash", "abort_request"}), kv, 1 + g() % 2,
      1 + g() % 2, mixed, pick({"round_robin", "least_outstanding", "least_kv"}),
      pick({"0.5", "5", "50"}), 1 + g() % 20);
  INFO(yaml);
  const RunResult r = run_yaml(yaml, /*check=*/true);
  const PolicySummary& p = r.policies.at(0);
  REQUIRE(p.cluster);
  // Unchecked, fast-forward (the decode aggregate: requests join a decode replica's batch when
  // their transfer ends, also while an iteration is in flight) and stepping agree to the bit.
  {
    const Scenario sc =
        load_scenario(ConfigNode::parse_string(yaml, "test.yaml"), Catalog::builtin());
    RunOptions o;
    o.sample_interval_s = 0.37;
    const RunResult ff = run_scenario(sc, o);
    o.fast_forward = false;
    const RunResult step = run_scenario(sc, o);
    CHECK(summary_csv(ff.policies) == summary_csv(step.policies));
    CHECK(ff.policies.at(0).iterations == step.policies.at(0).iterations);
  }
  int64_t total = 0;
  for (int64_t n : p.outcomes) total += n;
  CHECK(total == p.requests_total);
  CHECK(p.requests_total == 40);
  for (const ReplicaSummary& x : p.cluster->replicas) {
    int64_t own = 0;
    for (int64_t n : x.outcomes) own += n;
    CHECK(own == x.requests_total);
  }
}
