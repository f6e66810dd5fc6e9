// `kvsim capacity`: a search whose answer is derived by hand, its resume, and
// the cheapest configuration over a grid.
#include <catch2/catch.hpp>

#include <filesystem>

#include <unistd.h>

#include <fmt/format.h>

#include "core/errors.h"
#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "sim/capacity/capacity_search.h"

using namespace kvsim;

namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const char* name) {
  const fs::path d = fs::temp_directory_path() / fmt::format("kvsim-{}-{}", name, ::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// One sequence at a time (max_num_seqs 1): each request is a 100-token prefill then 99 decode
// steps, T seconds in all, whatever the load; requests arrive every 1/rate s.
constexpr int kRequests = 1000;
const char* kSerial = R"(
name: serial
model: llama-3-8b
gpu: h100-sxm
engine: {kv: {type: paged, block_size: 16}, max_num_seqs: 1}
workload:
  arrivals: {type: fixed, rate: 0.5}
  max_requests: 1000
  prompt_tokens: 100
  output_tokens: 100
policies: [{name: serial, guards: []}]
)";

CapacityOptions options(const fs::path& out, int jobs) {
  CapacityOptions o;
  o.source = "serial.yaml";
  o.scenario = YAML::Load(kSerial);
  o.criterion = parse_capacity_criterion("ttft_p99_s=1", 0.99);
  o.search_key = "workload.arrivals.rate";
  o.tolerance = 0.01;
  o.sweep.out_dir = out;
  o.sweep.jobs = jobs;
  return o;
}

}  // namespace

TEST_CASE("capacity search: a serial server's rate bound, derived by hand, and its resume",
          "[capacity]") {
  // The service time of one request: the prefill iteration (its TTFT, p) then decode steps with
  // contexts 101 .. 199, each iteration rounded to whole ns as the engine does.
  const Catalog& cat = Catalog::builtin();
  const GpuSpec& gpu = cat.gpu("h100-sxm");
  const LatencyModel lm(cat.model("llama-3-8b"), gpu, default_profile(gpu), AttentionKind::kFlash);
  BatchShape prefill;
  prefill.block_tokens = 16;
  prefill.prefill = {{.tokens = 100, .context_tokens = 0, .emits_token = true}};
  const SimTime p = seconds_to_sim(lm.iteration(prefill).seconds);
  SimTime t = p;
  for (int g = 1; g < 100; ++g) {
    BatchShape d;
    d.block_tokens = 16;
    d.decode_seqs = 1;
    d.decode_context_tokens = 100 + g;
    t += seconds_to_sim(lm.iteration(d).seconds);
  }
  const double T = sim_to_seconds(t), P = sim_to_seconds(p);
  // Below rate 1/T nobody waits: TTFT = P for all. Above it request k (0-based) starts k T after
  // the first and arrived k/rate after it: TTFT_k = P + k (T - 1/rate), linear in k, so the p99
  // (interpolated at position 0.99 (N - 1)) is P + 0.99 (N - 1)(T - 1/rate). The SLO TTFT p99 <= 1
  // holds up to rate* = 1 / (T - (1 - P) / (0.99 (N - 1))).
  const double rate_star = 1.0 / (T - (1.0 - P) / (0.99 * (kRequests - 1)));
  const fs::path dir = fresh_dir("capacity-serial");
  const CapacityReport r = run_capacity(options(dir, 2), cat);
  REQUIRE(r.configs.size() == 1);
  const CapacityConfig& c = r.configs[0];
  INFO(fmt::format("T {} P {} rate* {} found [{}, {})", T, P, rate_star, c.max_load, c.fail_load));
  CHECK(c.max_load <= rate_star * (1 + 1e-6));  // ns rounding of arrival times
  CHECK(c.fail_load >= rate_star * (1 - 1e-6));
  CHECK(c.fail_load - c.max_load <= 0.01 * c.fail_load);  // the stated tolerance
  CHECK(c.met);  // the scenario's own rate, 0.5/s, is served
  CHECK(c.cost.gpus == 1);
  CHECK(c.cost.cost_per_hour_usd() == gpu.gpu_hour_usd);
  CHECK(r.points_run == c.probes.size());
  CHECK(r.points_skipped == 0);

  // Resume: the same search into the same folder runs nothing and finds the same answer.
  const CapacityReport again = run_capacity(options(dir, 2), cat);
  CHECK(again.points_run == 0);
  CHECK(again.points_skipped == c.probes.size());
  CHECK(again.configs[0].max_load == c.max_load);
  CHECK(capacity_csv(again) == capacity_csv(r));
  fs::remove_all(dir);
}

TEST_CASE("capacity over a grid: the cheapest configuration that serves the load", "[capacity]") {
  // At 1.5 requests/s the serial server (rate bound ~1.2/s, above) fails its TTFT bound; two
  // sequences at a time serve it. H100 at 2.99 $/h vs A100 at 1.79 $/h (catalog prices); the
  // scenario's cost: block makes the A100 cost 5 $/h instead.
  const fs::path dir = fresh_dir("capacity-grid");
  CapacityOptions o = options(dir, 2);
  o.search_key.clear();
  o.scenario["workload"]["arrivals"]["rate"] = 1.5;
  o.scenario["cost"] = YAML::Load("{gpu_hour_usd: {a100-sxm4-80gb: 5}}");
  o.over = {parse_capacity_axis("engine.max_num_seqs=1..2"),
            parse_capacity_axis("gpu=a100-sxm4-80gb,h100-sxm")};
  const CapacityReport r = run_capacity(o, Catalog::builtin());
  REQUIRE(r.configs.size() == 4);  // (1, a100), (1, h100), (2, a100), (2, h100)
  CHECK_FALSE(r.configs[0].met);
  CHECK_FALSE(r.configs[1].met);
  CHECK(r.configs[3].met);
  CHECK(r.configs[0].cost.gpu_hour_usd == 5.0);
  CHECK(r.configs[0].cost.price_source == "scenario cost: block");
  CHECK(r.configs[3].cost.gpu_hour_usd == 2.99);
  CHECK(r.cheapest == 3);  // the H100 at 2.99 beats the A100 at 5 (whether or not it serves)
  fs::remove_all(dir);
}

TEST_CASE("capacity: bad criteria and axes are named", "[capacity]") {
  CHECK_THROWS_WITH(parse_capacity_criterion("ttft_p98_s=2", 0),
                    Catch::Contains("unknown figure 'ttft_p98_s'"));
  CHECK_THROWS_WITH(parse_capacity_criterion("ttft_p99_s", 0), Catch::Contains("name=value"));
  CHECK_THROWS_WITH(parse_capacity_criterion("", 0), Catch::Contains("no bound"));
  CHECK_THROWS_WITH(parse_capacity_axis("gpu"), Catch::Contains("KEY=a,b,c"));
  CHECK_THROWS_WITH(parse_capacity_axis("x=5..2"), Catch::Contains("lo <= hi"));
  CHECK(parse_capacity_axis("cluster.replicas.0.count=1..3").values ==
        std::vector<std::string>{"1", "2", "3"});
}

TEST_CASE("capacity cost: GPUs = TP x PP (the policy's engine first) x replicas", "[capacity]") {
  const YAML::Node t = YAML::Load(R"(
gpu: h100-sxm
engine: {tensor_parallel: 2, pipeline_parallel: 2}
cluster: {replicas: [{count: 3}, {count: 1}]}
policies: [{name: a, engine: {tensor_parallel: 4}}, {name: b}]
)");
  const ConfigCost a = config_cost(t, "t.yaml", "a", Catalog::builtin());
  CHECK(a.gpus == 4 * 2 * 4);  // policy a's TP 4, the scenario's PP 2, 3 + 1 replicas
  CHECK(a.cost_per_hour_usd() == Approx(32 * 2.99));
  const ConfigCost b = config_cost(t, "t.yaml", "b", Catalog::builtin());
  CHECK(b.gpus == 2 * 2 * 4);
}

TEST_CASE("capacity cost: each replica group counts with its own engine and GPU", "[capacity]") {
  // Two replicas of Llama-3-70B on H100 (catalog 2.99 $/h), the group's own engine TP 4, swept
  // over the count as `--over cluster.replicas.0.count=1,2` would: 1 x 4 = 4 GPUs, $11.96/h;
  // 2 x 4 = 8 GPUs, $23.92/h (not 1 and 2 GPUs: the group's TP counts).
  for (int count : {1, 2}) {
    const YAML::Node t = YAML::Load(fmt::format(R"(
gpu: h100-sxm
cluster: {{replicas: [{{name: big, count: {}, engine: {{tensor_parallel: 4}}}}]}}
policies: [{{name: p}}]
)",
                                                count));
    const ConfigCost c = config_cost(t, "t.yaml", "p", Catalog::builtin());
    CHECK(c.gpus == 4 * count);
    CHECK(c.replicas == count);
    CHECK(c.tensor_parallel == 4);
    CHECK(c.cost_per_hour_usd() == Approx(2.99 * 4 * count));
  }
}

TEST_CASE("capacity cost: a policy's own cluster is the one priced", "[capacity]") {
  // The scenario runs one mixed replica; policy `disagg` brings 1 prefill + 1 decode replica.
  // With engine.tensor_parallel 1 and 2: 2 x 1 = 2 and 2 x 2 = 4 GPUs at 2.99 $/h (5.98, 11.96);
  // policy `colo` keeps the scenario's single replica: 1 and 2 GPUs.
  for (int tp : {1, 2}) {
    const YAML::Node t = YAML::Load(fmt::format(R"(
gpu: h100-sxm
engine: {{tensor_parallel: {}}}
cluster: {{replicas: [{{name: mixed, count: 1}}]}}
policies:
  - {{name: colo}}
  - name: disagg
    cluster: {{replicas: [{{name: pre, role: prefill}}, {{name: dec, role: decode}}]}}
)",
                                                tp));
    const ConfigCost d = config_cost(t, "t.yaml", "disagg", Catalog::builtin());
    CHECK(d.gpus == 2 * tp);
    CHECK(d.replicas == 2);
    CHECK(d.cost_per_hour_usd() == Approx(2.99 * 2 * tp));
    const ConfigCost c = config_cost(t, "t.yaml", "colo", Catalog::builtin());
    CHECK(c.gpus == tp);
  }
}

TEST_CASE("capacity cost: groups on different GPUs are priced on each one's GPU", "[capacity]") {
  // Group a: 2 A100-80GB at TP 1 (the cost block's 1.50 $/h); group b: 1 H100 at TP 2 (the
  // catalog's 2.99). GPUs 2 x 1 + 1 x 2 = 4; cost 2 x 1.50 + 2 x 2.99 = 8.98 $/h.
  const YAML::Node t = YAML::Load(R"(
gpu: a100-sxm4-80gb
cost: {gpu_hour_usd: {a100-sxm4-80gb: 1.5}}
cluster:
  replicas:
    - {name: a, count: 2}
    - {name: b, count: 1, gpu: h100-sxm, engine: {tensor_parallel: 2}}
policies: [{name: p}]
)");
  const ConfigCost c = config_cost(t, "t.yaml", "p", Catalog::builtin());
  REQUIRE(c.groups.size() == 2);
  CHECK(c.groups[0].gpus == 2);
  CHECK(c.groups[0].gpu_hour_usd == 1.5);
  CHECK(c.groups[0].price_source == "scenario cost: block");
  CHECK(c.groups[1].gpus == 2);
  CHECK(c.groups[1].gpu == "h100-sxm");
  CHECK(c.groups[1].gpu_hour_usd == 2.99);
  CHECK(c.gpus == 4);
  CHECK(c.gpu == "a100-sxm4-80gb+h100-sxm");
  CHECK(c.gpu_hour_usd == 0);     // no single price: the groups' differ
  CHECK(c.tensor_parallel == 0);  // nor a single TP
  CHECK(c.cost_per_hour_usd() == Approx(8.98));
  // A GPU with no known price leaves the whole cost unknown (0), not a partial sum.
  const YAML::Node u = YAML::Load(R"(
gpu: a100-sxm4-80gb
cluster: {replicas: [{name: a}, {name: cpu, gpu: cpu-host}]}
policies: [{name: p}]
)");
  CHECK(config_cost(u, "u.yaml", "p", Catalog::builtin()).cost_per_hour_usd() == 0);
}

TEST_CASE("capacity: a GPU without a price is unpriced, not free", "[capacity]") {
  // The catalog prices the H100 SXM (2.99 $/h) but not the GB200 (no list price found:
  // gpu_hour_usd 0). At 1.5 requests/s two sequences at a time serve the load on either GPU
  // (the GB200 is faster still). Counted as $0.00/h the GB200 would be "cheapest"; it is
  // unpriced instead: the H100 is the cheapest priced configuration, and with --search the
  // GB200 is on no Pareto front (the H100 alone is priced, so it is the front).
  const fs::path dir = fresh_dir("capacity-unpriced");
  CapacityOptions o = options(dir, 2);
  o.search_key.clear();
  o.scenario["workload"]["arrivals"]["rate"] = 1.5;
  o.scenario["engine"]["max_num_seqs"] = 2;
  o.over = {parse_capacity_axis("gpu=h100-sxm,gb200")};
  const CapacityReport r = run_capacity(o, Catalog::builtin());
  REQUIRE(r.configs.size() == 2);
  CHECK(r.configs[0].met);
  CHECK(r.configs[1].met);
  CHECK(r.configs[0].cost.priced());
  CHECK_FALSE(r.configs[1].cost.priced());
  CHECK(r.cheapest == 0);
  CHECK(r.unpriced == std::vector<int>{1});
  CHECK_THAT(capacity_table(r), Catch::Contains("unpriced"));

  const fs::path sdir = fresh_dir("capacity-unpriced-search");
  CapacityOptions s = options(sdir, 2);
  s.over = {parse_capacity_axis("gpu=h100-sxm,gb200")};
  const CapacityReport sr = run_capacity(s, Catalog::builtin());
  REQUIRE(sr.configs.size() == 2);
  CHECK(sr.configs[1].max_load > 0);  // it serves some load, yet is off the front
  CHECK(sr.configs[0].pareto);
  CHECK_FALSE(sr.configs[1].pareto);
  fs::remove_all(dir);
  fs::remove_all(sdir);
}
