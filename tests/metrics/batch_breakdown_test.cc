// Batch and engine metrics and the per-request latency breakdown on
// runs small enough to follow iteration by iteration.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "sim/metrics/breakdown.h"
#include "sim/metrics/distribution.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;

namespace {

namespace fs = std::filesystem;

RunResult run_to(const std::string& yaml, const fs::path& out) {
  const Scenario s = load_scenario(ConfigNode::parse_string(yaml, "test.yaml"), Catalog::builtin());
  RunOptions o;
  o.out_dir = out.string();
  o.check_invariants = true;
  return run_scenario(s, o);
}

std::vector<std::vector<std::string>> csv_rows(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, ',')) cells.push_back(c);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    rows.push_back(cells);
  }
  return rows;
}

// "12.345678901" (the breakdown cells: exact ns) -> 12345678901.
int64_t cell_ns(const std::string& s) {
  const auto dot = s.find('.');
  REQUIRE(dot != std::string::npos);
  REQUIRE(s.size() - dot - 1 == 9);
  return std::stoll(s.substr(0, dot)) * kNsPerSecond + std::stoll(s.substr(dot + 1));
}

}  // namespace

TEST_CASE("CountDistribution: percentiles equal latency_stats' on the samples", "[metrics]") {
  // Samples 1, 1, 2, 200: p50 at position 1.5 -> 1 + (2 - 1) x 0.5 = 1.5; p90 at 2.7 ->
  // 2 + 198 x 0.7 = 140.6; p99 at 2.97 -> 2 + 198 x 0.97 = 194.06; mean 204 / 4 = 51.
  CountDistribution d;
  for (int64_t v : {200, 1, 2, 1}) d.add(v);
  const LatencyStats s = d.stats();
  const LatencyStats ref = latency_stats({1, 1, 2, 200});
  CHECK(s.count == 4);
  CHECK(s.p50 == 1.5);
  CHECK(s.p90 == Approx(140.6).epsilon(1e-12));
  CHECK(s.p99 == Approx(194.06).epsilon(1e-12));
  CHECK(s.mean == 51.0);
  CHECK(s.p90 == ref.p90);
  CHECK(s.p99 == ref.p99);
}

TEST_CASE("LogDistribution: percentiles within 0.5%, the mean exact", "[metrics]") {
  LogDistribution d;
  // 1 ms .. 1000 ms in 1 ms steps: the true p50 is 500.5 ms, the mean 500.5 ms.
  for (int64_t ms = 1; ms <= 1000; ++ms) d.add(ms * 1'000'000);
  const LatencyStats s = d.stats_seconds();
  CHECK(s.count == 1000);
  CHECK(s.mean == Approx(0.5005).epsilon(1e-12));
  CHECK(s.p50 == Approx(0.5005).epsilon(0.005));
  CHECK(s.p99 == Approx(0.99001).epsilon(0.005));  // 990 + 0.01 x (991 - 990) ms
}

TEST_CASE("request_breakdown: the five parts sum to E2E, preemption split at the first token",
          "[metrics]") {
  // Arrives at 10, leaves the guard queue at 15, first scheduled at 18, preempted 20 -> 23
  // (before the first token), first token at 30, preempted 40 -> 44, finished at 60.
  RequestState r;
  r.spec.arrival = 10;
  r.admitted_at = 15;
  r.first_scheduled_at = 18;
  r.preempted_at = 20;
  r.end_preemption(23);  // first_token_at < 0: before the first token
  r.first_token_at = 30;
  r.preempted_at = 40;
  r.end_preemption(44);
  r.finished_at = 60;
  const RequestBreakdown b = request_breakdown(r);
  CHECK(b.guard_queue == 5);  // 15 - 10
  CHECK(b.engine_wait == 3);  // 18 - 15
  CHECK(b.prefill == 9);      // 30 - 18 - 3
  CHECK(b.decode == 26);      // 60 - 30 - 4
  CHECK(b.preempted == 7);    // 3 + 4
  CHECK(b.sum() == 60 - 10);  // E2E
  CHECK(r.preempted_at == -1);
}

TEST_CASE("batch metrics and breakdown of two requests, iteration by iteration",
          "[metrics][engine]") {
  const fs::path dir = test::fresh_dir("batch-metrics");
  const fs::path trace = dir / "two.csv";
  // Both arrive at 0 with 100-token prompts; one wants 4 output tokens, the other 2.
  std::ofstream(trace) << "arrival_s,prompt_tokens,output_tokens\n0,100,4\n0,100,2\n";
  const std::string yaml = fmt::format(R"(
name: two
model: llama-3-8b
gpu: a100-sxm4-80gb
engine: {{kv: {{type: paged, block_size: 16}}}}
workload: {{trace: {{path: {}}}}}
policies: [{{name: p, guards: []}}]
)",
                                       trace.string());
  const RunResult r = run_to(yaml, dir / "out");
  const PolicySummary& p = r.policies.at(0);
  // Iteration 1 prefills both (2 sequences, 200 tokens; each emits its first token). 2 decodes
  // both (2 sequences, 2 tokens; the 2-token request is done). 3 and 4 decode the other alone
  // (1 sequence, 1 token each). Sizes 2, 2, 1, 1; tokens 200, 2, 1, 1.
  const BatchSummary& b = p.batch;
  CHECK(b.iterations == 4);
  CHECK(b.batch_size.p50 == 1.5);  // position 1.5 of 1, 1, 2, 2
  CHECK(b.batch_size.p90 == 2.0);
  CHECK(b.batch_size.p99 == 2.0);
  CHECK(b.batch_size.mean == 1.5);
  CHECK(b.batch_tokens.p50 == 1.5);  // position 1.5 of 1, 1, 2, 200
  CHECK(b.batch_tokens.p90 == Approx(140.6).epsilon(1e-12));
  CHECK(b.batch_tokens.mean == 51.0);
  CHECK(b.batch_size_hist.edges == std::vector<double>{1, 2, 3});
  CHECK(b.batch_size_hist.counts == std::vector<int64_t>{2, 2});

  // The same four iterations through the latency model: decode contexts are prompt + tokens
  // generated, (100 + 1) x 2 = 202, then 102 and 103 for the one left.
  const Catalog& cat = Catalog::builtin();
  const GpuSpec& gpu = cat.gpu("a100-sxm4-80gb");
  const LatencyModel lm(cat.model("llama-3-8b"), gpu, default_profile(gpu), AttentionKind::kFlash);
  std::vector<BatchShape> shapes(4);
  for (BatchShape& s : shapes) s.block_tokens = 16;
  shapes[0].prefill = {{.tokens = 100, .context_tokens = 0, .emits_token = true},
                       {.tokens = 100, .context_tokens = 0, .emits_token = true}};
  shapes[1].decode_seqs = 2, shapes[1].decode_context_tokens = 202;
  shapes[2].decode_seqs = 1, shapes[2].decode_context_tokens = 102;
  shapes[3].decode_seqs = 1, shapes[3].decode_context_tokens = 103;
  std::vector<SimTime> d;
  double flops = 0;
  for (const BatchShape& s : shapes) {
    const IterationCost c = lm.iteration(s);
    d.push_back(std::max<SimTime>(1, seconds_to_sim(c.seconds)));
    flops += c.flops;
  }
  const SimTime total = d[0] + d[1] + d[2] + d[3];
  // Back to back from t = 0 to the last outcome: busy the whole time.
  CHECK(p.duration_s == sim_to_seconds(total));
  CHECK(b.busy_s == sim_to_seconds(total));
  CHECK(b.busy_share == 1.0);
  CHECK(b.iteration_s.mean == Approx(sim_to_seconds(total) / 4).epsilon(1e-12));
  CHECK(b.flops == Approx(flops).epsilon(1e-12));
  CHECK(b.peak_flops_per_s == gpu.fp16_flops);
  CHECK(b.mfu == Approx(flops / (gpu.fp16_flops * sim_to_seconds(total))).epsilon(1e-12));

  // Breakdown: no guard, no wait; prefill = iteration 1; decode = the rest of each request.
  const auto rows = csv_rows(dir / "out" / "requests.csv");
  REQUIRE(rows.size() == 3);
  const auto& h = rows[0];
  REQUIRE(h.size() == 18);
  CHECK(h[13] == "guard_queue_s");
  CHECK(h[17] == "preempted_s");
  const auto& r0 = rows[1];
  const auto& r1 = rows[2];
  CHECK(cell_ns(r0[13]) == 0);
  CHECK(cell_ns(r0[14]) == 0);
  CHECK(cell_ns(r0[15]) == d[0]);
  CHECK(cell_ns(r0[16]) == d[1] + d[2] + d[3]);
  CHECK(cell_ns(r0[17]) == 0);
  CHECK(cell_ns(r1[15]) == d[0]);
  CHECK(cell_ns(r1[16]) == d[1]);
  CHECK(p.breakdown.count == 2);
  CHECK(p.breakdown.prefill_s == sim_to_seconds(2 * d[0]) / 2);
  CHECK(p.breakdown.decode_s == sim_to_seconds(d[1] + d[2] + d[3] + d[1]) / 2);
  fs::remove_all(dir);
}

TEST_CASE("breakdown cells sum to E2E under guard queueing and preemption", "[metrics][engine]") {
  // The small GPU's paged pool holds ~29,500 tokens of seed-7b-mha; 40 requests of 2,000 + 1,000
  // tokens arriving at 20/s need far more: the unguarded policy preempts (recompute), the
  // reserve guard queues arrivals instead.
  const fs::path dir = test::fresh_dir("breakdown-sum");
  const std::string yaml = fmt::format(R"(
name: pressure
seed: 3
model: seed-7b-mha
gpu: {}
engine: {{kv: {{type: paged, block_size: 16}}, max_model_len: 4096}}
workload:
  arrivals: {{type: poisson, rate: 20}}
  max_requests: 40
  prompt_tokens: 2000
  output_tokens: 1000
policies: [{{name: none, guards: []}}, {{name: queue, guards: [{{type: reserve}}]}}]
)",
                                       kvsim::test::kSmallGpu);
  const RunResult r = run_to(yaml, dir);
  CHECK(r.policies.at(0).preemptions > 0);
  const auto rows = csv_rows(dir / "requests.csv");
  int64_t completed = 0, preempted = 0, guarded = 0, waited = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto& c = rows[i];
    REQUIRE(c.size() == 18);
    if (c[7] != "completed") {
      CHECK(c[13].empty());
      continue;
    }
    ++completed;
    int64_t sum = 0;
    for (int k = 13; k < 18; ++k) {
      const int64_t ns = cell_ns(c[k]);
      CHECK(ns >= 0);
      sum += ns;
    }
    // e2e_s is (finished - arrival) printed with 6 decimals: the parts' ns sum prints the same.
    CHECK(fmt::format("{:.6f}", sim_to_seconds(sum)) == c[10]);
    preempted += cell_ns(c[17]) > 0;
    guarded += cell_ns(c[13]) > 0;
    waited += cell_ns(c[14]) > 0;
  }
  CHECK(completed == 80);
  CHECK(preempted > 0);
  CHECK(guarded > 0);
  CHECK(waited > 0);
  fs::remove_all(dir);
}

TEST_CASE(
    "a cluster's batch block: every replica's iterations, GPU-time-weighted busy share and MFU",
    "[metrics][engine][cluster]") {
  const fs::path dir = test::fresh_dir("cluster-batch");
  const fs::path trace = dir / "three.csv";
  // Round robin over replica a-0 (TP 1, one GPU) and b-0 (TP 2, two GPUs): request 0 (t = 0,
  // 100 + 3) to a-0, request 1 (t = 0, 100 + 2) to b-0, request 2 (t = 10 s, 50 + 1) to a-0.
  std::ofstream(trace) << "arrival_s,prompt_tokens,output_tokens\n0,100,3\n0,100,2\n10,50,1\n";
  const std::string yaml = fmt::format(R"(
name: two-replicas
model: llama-3-8b
gpu: a100-sxm4-80gb
engine: {{kv: {{type: paged, block_size: 16}}}}
cluster:
  router: {{type: round_robin}}
  replicas:
    - {{name: a, count: 1}}
    - {{name: b, count: 1, engine: {{tensor_parallel: 2}}}}
workload: {{trace: {{path: {}}}}}
policies: [{{name: p, guards: []}}]
)",
                                       trace.string());
  const RunResult r = run_to(yaml, dir / "out");
  const PolicySummary& p = r.policies.at(0);
  REQUIRE(p.cluster);
  REQUIRE(p.cluster->replicas.size() == 2);
  const BatchSummary& a = p.cluster->replicas[0].batch;
  const BatchSummary& b = p.cluster->replicas[1].batch;
  // a-0: prefill 100 (its first token), decodes at contexts 101 and 102; at 10 s prefill 50
  // (its only token): 4 iterations of 1 sequence, tokens 100, 1, 1, 50.
  // b-0: prefill 100, one decode at context 101: 2 iterations, tokens 100, 1.
  CHECK(a.iterations == 4);
  CHECK(b.iterations == 2);
  CHECK(p.cluster->replicas[0].gpus == 1);
  CHECK(p.cluster->replicas[1].gpus == 2);
  // The cluster: 6 iterations, all of 1 sequence; tokens 1, 1, 1, 50, 100, 100: mean 253 / 6,
  // p50 at position 2.5: 1 + (50 - 1) x 0.5 = 25.5.
  const BatchSummary& c = p.batch;
  CHECK(c.iterations == 6);
  CHECK(p.iterations == 6);
  CHECK(c.batch_size.mean == 1.0);
  CHECK(c.batch_tokens.mean == Approx(253.0 / 6).epsilon(1e-12));
  CHECK(c.batch_tokens.p50 == 25.5);
  CHECK(c.batch_size_hist.counts == std::vector<int64_t>{6});

  // The iterations' times and FLOPs per GPU from the latency model, TP 1 and TP 2.
  const Catalog& cat = Catalog::builtin();
  const GpuSpec& gpu = cat.gpu("a100-sxm4-80gb");
  const LatencyModel la(cat.model("llama-3-8b"), gpu, default_profile(gpu), AttentionKind::kFlash);
  const LatencyModel lb(cat.model("llama-3-8b"), gpu, default_profile(gpu), AttentionKind::kFlash,
                        2, 1);
  auto prefill = [](int64_t tokens) {
    BatchShape s;
    s.block_tokens = 16;
    s.prefill = {{.tokens = tokens, .context_tokens = 0, .emits_token = true}};
    return s;
  };
  auto decode = [](int64_t context) {
    BatchShape s;
    s.block_tokens = 16;
    s.decode_seqs = 1, s.decode_context_tokens = context;
    return s;
  };
  SimTime busy_a = 0, busy_b = 0;
  double flops_a = 0, flops_b = 0;
  SimTime last_a = 0;
  for (const BatchShape& s : {prefill(100), decode(101), decode(102)}) {
    busy_a += test::iteration_ns(la, s);
    flops_a += la.iteration(s).flops;
  }
  last_a = test::iteration_ns(la, prefill(50));
  busy_a += last_a;
  flops_a += la.iteration(prefill(50)).flops;
  for (const BatchShape& s : {prefill(100), decode(101)}) {
    busy_b += test::iteration_ns(lb, s);
    flops_b += lb.iteration(s).flops;
  }
  // a-0 runs from 0 to 10 s + its last prefill (idle in between); b-0 back to back.
  const double da = 10.0 + sim_to_seconds(last_a), db = sim_to_seconds(busy_b);
  CHECK(p.cluster->replicas[0].batch.busy_s == sim_to_seconds(busy_a));
  CHECK(a.busy_share == Approx(sim_to_seconds(busy_a) / da).epsilon(1e-12));
  CHECK(b.busy_share == 1.0);
  CHECK(c.busy_s == Approx(sim_to_seconds(busy_a + busy_b)).epsilon(1e-12));
  // Busy share: busy GPU-seconds over GPU-seconds, 1 x busy_a + 2 x busy_b over 1 x da + 2 x db.
  const double gpu_s = 1 * da + 2 * db;
  CHECK(c.busy_share == Approx((sim_to_seconds(busy_a) + 2 * db) / gpu_s).epsilon(1e-9));
  // MFU: each GPU's FLOPs over its peak, over the same GPU-seconds.
  const double peak = gpu.fp16_flops;
  CHECK(a.mfu == Approx(flops_a / (peak * da)).epsilon(1e-9));
  CHECK(b.mfu == Approx(flops_b / (peak * db)).epsilon(1e-9));
  CHECK(c.mfu == Approx((1 * flops_a + 2 * flops_b) / peak / gpu_s).epsilon(1e-9));
  CHECK(c.flops == Approx((1 * flops_a + 2 * flops_b) / 3).epsilon(1e-9));
  CHECK(c.peak_flops_per_s == peak);

  // summary.csv: batch cells on the totals row and on each replica's.
  const auto rows = csv_rows(dir / "out" / "summary.csv");
  REQUIRE(rows.size() == 4);
  const auto& h = rows[0];
  REQUIRE(h.size() >= 6);
  const size_t n = h.size();
  CHECK(h[n - 6] == "iterations");
  CHECK(h[n - 2] == "mfu");
  CHECK(h[n - 1] == "replica");
  CHECK(rows[1][n - 6] == "6");
  CHECK(rows[1][n - 1] == "all");
  CHECK(rows[2][n - 6] == "4");
  CHECK(rows[2][n - 1] == "a-0");
  CHECK(rows[3][n - 6] == "2");
  CHECK(std::stod(rows[3][n - 3]) == 1.0);  // b-0's busy share
  fs::remove_all(dir);
}
