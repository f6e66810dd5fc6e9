// Clusters of replicas behind a router (docs/cluster.md): routing worked out by hand, the
// replicas' results against the totals, a sweep over the replica count, and bad input.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/catalog.h"
#include "sim/cluster/router.h"
#include "sim/sweep/sweep_plan.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;
using kvsim::test::count;
using kvsim::test::prepare_error;
using kvsim::test::run_yaml;

namespace {

const ReplicaSummary& replica(const PolicySummary& p, size_t i) {
  return p.cluster->replicas.at(i);
}

int64_t replica_count(const ReplicaSummary& r, Outcome o) { return r.outcomes[outcome_index(o)]; }

std::unique_ptr<Router> router(const std::string& type, uint64_t seed = 0) {
  return make_router(ConfigNode::parse_string("{type: " + type + "}", "router.yaml"),
                     RouterContext{.seed = seed});
}

}  // namespace

// 400 requests, one every 0.1 s, round robin over 3 A100s and 1 H100: request k goes to replica
// k mod 4 (none is ever down), so each serves exactly 100; the totals are the 400.
TEST_CASE("round robin over 4 replicas gives each a quarter of 400 requests", "[engine][cluster]") {
  const RunResult r = run_yaml(R"(
name: rr
model: llama-2-7b
gpu: a100-sxm4-80gb
cluster:
  replicas:
    - {name: a100, count: 3}
    - {name: h100, count: 1, gpu: h100-sxm}
  router: {type: round_robin}
workload:
  arrivals: {type: fixed, rate: 10}
  max_requests: 400
  prompt_tokens: 200
  output_tokens: 20
policies: [{name: rr, guards: []}]
)");
  const PolicySummary& p = r.policies.at(0);
  REQUIRE(p.cluster);
  CHECK(p.cluster->router == "round_robin");
  REQUIRE(p.cluster->replicas.size() == 4);
  CHECK(p.requests_total == 400);
  CHECK(count(p, Outcome::kCompleted) == 400);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(replica(p, i).requests_total == 100);
    CHECK(replica_count(replica(p, i), Outcome::kCompleted) == 100);
  }
  CHECK(replica(p, 0).label == "a100-0");
  CHECK(replica(p, 2).label == "a100-2");
  CHECK(replica(p, 3).label == "h100-0");
  CHECK(replica(p, 3).gpu == "h100-sxm");
  CHECK(replica(p, 3).role == "mixed");
}

// Two small replicas (kSmallGpu: one 16,384-token request fits, two do not; an OOM crashes the
// replica, which restarts after 10 s), least_outstanding, arrivals from a trace (prefill of one
// request takes ~1.3 s, its 16 tokens end at ~1.55 s after arrival):
//   id 0 at 0.0: outstanding (0, 0), tie -> r-0
//   id 1 at 0.1: (1, 0) -> r-1 (completes at ~1.65)
//   id 2 at 0.2: (1, 1), tie -> r-0; when id 0's prefill ends (~1.3) id 2 cannot be admitted
//                beside it: OOM, crash, both lost; r-0 down until ~11.3 with 0 outstanding
//   id 3 at 2.0: (0 down, 0) -> r-1, although r-0 has no request either (a down replica is never
//                chosen; by index it would win the tie)
//   id 4 at 2.1: (0 down, 1) -> r-1 (by count r-0 would win); r-1 crashes at ~3.3 (ids 3, 4 lost)
//   id 5 at 4.0: both down -> failed_unavailable on no replica ("none")
//   id 6 at 20 : both up again, (0, 0) -> r-0, completed
// r-0: 3 requests (1 completed, 2 lost_oom, 1 restart); r-1: 3 (1 completed, 2 lost_oom);
// totals: 7 = 2 completed + 4 lost_oom + 1 failed_unavailable.
TEST_CASE("least_outstanding never routes to a replica that crashed and is restarting",
          "[engine][cluster]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("kvsim-cluster-{}", ::getpid());
  fs::create_directories(dir);
  const fs::path trace = dir / "lo.csv";
  std::ofstream(trace) << "arrival_s,prompt_tokens,output_tokens\n0.0,16384,16\n0.1,16384,16\n"
                          "0.2,16384,16\n2.0,16384,16\n2.1,16384,16\n4.0,16384,16\n20.0,16384,16\n";
  const RunResult r = run_yaml(fmt::format(R"(
name: lo
model: seed-7b-mha
gpu: {}
engine: {{kv: {{type: caching_allocator, growth: preallocate}}, on_oom: crash, restart_s: 10, max_model_len: 16400}}
cluster:
  replicas: [{{name: r, count: 2}}]
  router: {{type: least_outstanding}}
workload:
  trace: {{path: {}}}
policies: [{{name: lo, guards: []}}]
)",
                                           kvsim::test::kSmallGpu, trace.string()));
  fs::remove_all(dir);
  const PolicySummary& p = r.policies.at(0);
  REQUIRE(p.cluster);
  CHECK(p.requests_total == 7);
  CHECK(count(p, Outcome::kCompleted) == 2);
  CHECK(count(p, Outcome::kLostOom) == 4);
  CHECK(count(p, Outcome::kFailedUnavailable) == 1);
  CHECK(p.oom_events == 2);
  CHECK(p.restarts == 2);
  for (size_t i = 0; i < 2; ++i) {
    INFO("replica " << i);
    CHECK(replica(p, i).requests_total == 3);
    CHECK(replica_count(replica(p, i), Outcome::kCompleted) == 1);
    CHECK(replica_count(replica(p, i), Outcome::kLostOom) == 2);
    CHECK(replica(p, i).restarts == 1);
  }
}

// The routers on hand-made views: only up replicas are chosen, ties to the lowest index.
TEST_CASE("each router's choice on given replica views", "[cluster][router]") {
  const RequestSpec spec;
  std::vector<ReplicaView> v = {{.outstanding = 0, .kv_usage = 0.0, .up = false},
                                {.outstanding = 5, .kv_usage = 0.9, .up = true},
                                {.outstanding = 2, .kv_usage = 0.5, .up = true},
                                {.outstanding = 2, .kv_usage = 0.1, .up = true}};
  // round robin: 0 is down, so 1, 2, 3, then 1 again.
  auto rr = router("round_robin");
  CHECK(rr->route(spec, v) == 1);
  CHECK(rr->route(spec, v) == 2);
  CHECK(rr->route(spec, v) == 3);
  CHECK(rr->route(spec, v) == 1);
  // least_outstanding: 2 and 3 tie at 2 -> 2 (replica 0 has fewer but is down).
  CHECK(router("least_outstanding")->route(spec, v) == 2);
  // least_kv: 3 reports 10%.
  CHECK(router("least_kv")->route(spec, v) == 3);
  // random: never the down replica; the same seed draws the same choices.
  auto a = router("random", 7), b = router("random", 7);
  for (int k = 0; k < 50; ++k) {
    const int x = a->route(spec, v);
    CHECK(x != 0);
    CHECK(x == b->route(spec, v));
  }
  // session affinity: one session, one replica, every time; prefix affinity the same per first
  // hash.
  RequestSpec s1;
  s1.session_id = 12345;
  auto sa = router("session_affinity");
  const int first = sa->route(s1, v);
  CHECK(first != 0);
  for (int k = 0; k < 5; ++k) CHECK(sa->route(s1, v) == first);
  RequestSpec p1;
  p1.prefix_hashes = {99, 1};
  RequestSpec p2;
  p2.prefix_hashes = {99, 2};
  auto pa = router("prefix_affinity");
  CHECK(pa->route(p1, v) == pa->route(p2, v));
  // Every replica down: nothing.
  for (auto& x : v) x.up = false;
  for (const char* t : {"round_robin", "random", "least_outstanding", "least_kv",
                        "session_affinity", "prefix_affinity"}) {
    CHECK(router(t)->route(s1, v) == -1);
  }
}

// sweep over cluster.replicas.0.count: 1, 2, 4 replicas of one group, round robin, 8 requests:
// each replica serves 8 / n.
TEST_CASE("a sweep over cluster.replicas.0.count runs each count", "[engine][cluster][sweep]") {
  const ConfigNode root = ConfigNode::parse_string(R"(
name: sweep-count
model: llama-2-7b
gpu: a100-sxm4-80gb
cluster: {replicas: [{name: a, count: 1}], router: {type: round_robin}}
workload: {arrivals: {type: fixed, rate: 10}, max_requests: 8, prompt_tokens: 100, output_tokens: 4}
policies: [{name: p, guards: []}]
sweep: {grid: {cluster.replicas.0.count: [1, 2, 4]}}
)",
                                                   "sweep.yaml");
  const SweepPlan plan = expand_sweep(root);
  REQUIRE(plan.points.size() == 3);
  const int counts[] = {1, 2, 4};
  for (size_t i = 0; i < 3; ++i) {
    const Scenario s =
        load_scenario(ConfigNode::wrap(plan.points[i].tree, "sweep.yaml"), Catalog::builtin());
    const RunResult r = run_scenario(s, RunOptions{});
    const PolicySummary& p = r.policies.at(0);
    REQUIRE(p.cluster->replicas.size() == static_cast<size_t>(counts[i]));
    for (const ReplicaSummary& x : p.cluster->replicas) CHECK(x.requests_total == 8 / counts[i]);
  }
}

TEST_CASE("a bad cluster section is an error at its position", "[engine][cluster][errors]") {
  auto error_of = [](const std::string& cluster, const std::string& policy_extra = "") {
    const std::string yaml = fmt::format(R"(name: bad
model: llama-2-7b
gpu: a100-sxm4-80gb
{}
workload: {{arrivals: {{type: fixed, rate: 10}}, max_requests: 2, prompt_tokens: 100, output_tokens: 4}}
policies: [{{name: p, guards: []{}}}]
)",
                                         cluster, policy_extra);
    return prepare_error(yaml);
  };
  CHECK_THAT(error_of("cluster: {replicas: [{name: a, count: 0}]}"),
             Catch::Contains("bad.yaml:4:") && Catch::Contains("count"));
  CHECK_THAT(error_of("cluster: {replicas: [{name: a}], router: {type: least_outstandin}}"),
             Catch::Contains("bad.yaml:4:") && Catch::Contains("least_outstanding"));
  CHECK_THAT(error_of("cluster: {replicas: [{name: a, role: prefill}]}"),
             Catch::Contains("bad.yaml:4:") && Catch::Contains("mixed"));
  CHECK_THAT(error_of("cluster: {replicas: [{name: a}, {name: a}]}"),
             Catch::Contains("bad.yaml:4:") && Catch::Contains("duplicate"));
  CHECK_THAT(error_of("cluster: {replicas: [{name: a, gpu: h100-sxn}]}"),
             Catch::Contains("h100-sxm"));
  CHECK_THAT(error_of("cluster: {replicas: [{name: a, engine: {tensor_paralel: 2}}]}"),
             Catch::Contains("bad.yaml:4:") && Catch::Contains("tensor_parallel"));
  CHECK_THAT(error_of("cluster: {replicas: [], router: {type: random}}"),
             Catch::Contains("bad.yaml:4:") && Catch::Contains("non-empty"));
  CHECK_THAT(error_of("cluster: {replicas: [{name: a}]}", ", cluster: {replicas: []}"),
             Catch::Contains("bad.yaml:6:") && Catch::Contains("replicas"));
  CHECK_THAT(error_of("", ", cluster: {router: {type: random}}"),
             Catch::Contains("bad.yaml:6:") && Catch::Contains("cluster"));
}

// Same scenario and seed, same bytes, with the random router (its own stream of the scenario's
// seed) and closed-loop clients (their next request is routed when the last one finishes);
// requests.csv and timeseries.csv end with the `replica` column.
TEST_CASE("a cluster run is a pure function of its scenario and seed",
          "[engine][cluster][determinism]") {
  namespace fs = std::filesystem;
  const Scenario s = load_scenario(ConfigNode::parse_string(R"(
name: det
seed: 11
model: llama-2-7b
gpu: a100-sxm4-80gb
cluster:
  replicas: [{name: a, count: 2}, {name: h, count: 1, gpu: h100-sxm}]
  router: {type: random}
workload:
  clients: {type: closed_loop, count: 5, think_s: 0.2}
  prompt_tokens: {type: uniform, min: 50, max: 500}
  output_tokens: {type: uniform, min: 5, max: 50}
  duration_s: 10
policies: [{name: p, guards: []}, {name: q, guards: [], cluster: {router: {type: least_kv}}}]
)",
                                                            "det.yaml"),
                                   Catalog::builtin());
  auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream b;
    b << in.rdbuf();
    return b.str();
  };
  const fs::path base = fs::temp_directory_path() / fmt::format("kvsim-cluster-det-{}", ::getpid());
  std::string runs[2];
  for (int k = 0; k < 2; ++k) {
    RunOptions o;
    o.out_dir = (base / std::to_string(k)).string();
    run_scenario(s, o);
    for (const char* f : {"summary.json", "summary.csv", "requests.csv", "timeseries.csv"}) {
      runs[k] += read(fs::path(o.out_dir) / f);
    }
  }
  const std::string requests = read(base / "0" / "requests.csv");
  const std::string series = read(base / "0" / "timeseries.csv");
  fs::remove_all(base);
  CHECK(runs[0].size() > 1000);
  CHECK(runs[0] == runs[1]);
  CHECK(requests.substr(0, requests.find('\n'))
            .ends_with(",tokens_dropped,guard_queue_s,engine_wait_s,prefill_s,decode_s,preempted_s,"
                       "replica"));
  CHECK(series.substr(0, series.find('\n')).ends_with(",running,replica"));
}

// manifest.json's gpus_per_policy counts every GPU of the cluster: policy `tp` runs 2 replicas
// at the group's TP 2, 2 x 2 = 4 GPUs; policy `disagg` brings its own 1 prefill + 1 decode
// replica at the scenario's TP 1, 2 GPUs; summary.json's per-replica entries carry their GPUs.
TEST_CASE("manifest gpus_per_policy sums every replica group's TP x PP", "[engine][cluster]") {
  const std::filesystem::path dir = test::fresh_dir("cluster-gpus");
  const Scenario s = load_scenario(ConfigNode::parse_string(R"(
name: gpus
model: llama-2-7b
gpu: a100-sxm4-80gb
cluster:
  replicas: [{name: g, count: 2, engine: {tensor_parallel: 2}}]
workload:
  arrivals: {type: fixed, rate: 10}
  max_requests: 8
  prompt_tokens: 200
  output_tokens: 4
policies:
  - {name: tp, guards: []}
  - name: disagg
    guards: []
    cluster: {replicas: [{name: pre, role: prefill}, {name: dec, role: decode}]}
)",
                                                            "gpus.yaml"),
                                   Catalog::builtin());
  RunOptions o;
  o.out_dir = (dir / "out").string();
  const RunResult r = run_scenario(s, o);
  CHECK(r.policies.at(0).gpus == 4);
  CHECK(r.policies.at(1).gpus == 2);
  const auto manifest = nlohmann::json::parse(test::file_text(dir / "out" / "manifest.json"));
  CHECK(manifest["gpus_per_policy"]["tp"] == 4);
  CHECK(manifest["gpus_per_policy"]["disagg"] == 2);
  CHECK(manifest["memory_figures"] == "per GPU");  // a `tp` replica spans 2 GPUs
  const auto summary = nlohmann::json::parse(test::file_text(dir / "out" / "summary.json"));
  CHECK(summary["policies"][0]["replicas"][1]["gpus"] == 2);
  CHECK(summary["policies"][1]["replicas"][0]["gpus"] == 1);
  std::filesystem::remove_all(dir);
}
