// Data parallelism as vLLM V1 runs it (docs/cluster.md "Lockstep data parallelism"): the DP load
// balancer's choice with stale, published counts, and lockstep MoE ranks (the slower rank's step,
// padding, dummy forwards, the 32-step tail and waves), each worked out by hand. The engines time
// their steps with a declared step_time, so every duration is exact: 10 ms + 0.1 ms a token +
// 1 ms a sequence (lockstep) or a flat 10 ms (balancer).
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/config_node.h"
#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "models/memory/gpu_memory_pool.h"
#include "sim/cluster/cluster.h"
#include "sim/cluster/cluster_config.h"
#include "sim/cluster/router.h"
#include "sim/engine/event_queue.h"
#include "sim/metrics/recorder.h"
#include "sim/serving/engine_config.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;

namespace {

struct Arrival {
  double at_s;
  int64_t prompt;
  int64_t output;
};

struct DpRun {
  std::map<int64_t, RequestState> done;  // by id
  std::vector<int64_t> per_rank;         // requests each rank received
  LockstepStats stats;                   // the lockstep group's (zero without one)
  SimTime end = 0;                       // the last event's time
};

std::unique_ptr<Router> dp_router(const std::string& yaml) {
  return make_router(ConfigNode::parse_string(yaml, "router.yaml"), RouterContext{});
}

// Two DP ranks of Qwen3-30B-A3B (MoE, data_parallel 2, expert parallel) on H100s, synchronous
// scheduling, steps timed by `step_time`; with `lockstep`, one lockstep group of both.
DpRun drive(const std::string& step_time, const std::string& router,
            std::optional<LockstepOptions> lockstep, const std::vector<Arrival>& arrivals) {
  spdlog::set_level(spdlog::level::warn);
  const Catalog& catalog = Catalog::builtin();
  const ModelSpec model = catalog.model("qwen3-30b-a3b");
  const GpuSpec gpu = catalog.gpu("h100-sxm");
  const EngineConfig config = parse_engine_config(ConfigNode::parse_string(
      "{async_scheduling: false, data_parallel: 2, expert_parallel: true, max_model_len: 4096, "
      "step_time: " +
          step_time + "}",
      "engine.yaml"));
  const PoolOptions options{.workspace_bytes = config.workspace_bytes,
                            .attention = config.attention,
                            .profile_batched_tokens = config.max_num_batched_tokens,
                            .profile_num_seqs = config.max_num_seqs,
                            .parallelism = {.tensor = 1, .pipeline = 1, .data = 2, .expert = true}};
  const ConfigNode kv = ConfigNode::parse_string("{type: paged, num_blocks: 1000}", "kv.yaml");
  GpuMemoryPool pool0(model, gpu, kv, options), pool1(model, gpu, kv, options);
  const LatencyModel latency(model, gpu, default_profile(gpu), config.attention);
  EventQueue events;
  Recorder totals("dp"), rec0("dp"), rec1("dp");
  Cluster cluster(events, dp_router(router), totals);
  cluster.add_replica("dp-0", pool0, latency, config, {}, rec0, kv_pool_capacity_bytes(pool0));
  cluster.add_replica("dp-1", pool1, latency, config, {}, rec1, kv_pool_capacity_bytes(pool1));
  const LockstepGroup* group = lockstep ? &cluster.add_lockstep_group({0, 1}, *lockstep) : nullptr;
  cluster.set_check_invariants(true);
  DpRun run;
  cluster.set_on_finished([&](const RequestState& r) { run.done.emplace(r.spec.id, r); });
  for (size_t i = 0; i < arrivals.size(); ++i) {
    RequestSpec spec;
    spec.id = static_cast<int64_t>(i);
    spec.arrival = seconds_to_sim(arrivals[i].at_s);
    spec.prompt_tokens = arrivals[i].prompt;
    spec.output_tokens = arrivals[i].output;
    events.schedule_at(spec.arrival, [&cluster, spec] { cluster.arrive(spec); });
  }
  events.run();
  cluster.finish();
  run.end = events.now();
  run.per_rank = {rec0.finish(events.now()).requests_total,
                  rec1.finish(events.now()).requests_total};
  if (group != nullptr) run.stats = group->stats();
  return run;
}

SimTime ms(double v) { return seconds_to_sim(v * 1e-3); }

SimTime e2e(const DpRun& r, int64_t id) {
  const RequestState& s = r.done.at(id);
  return s.finished_at - s.spec.arrival;
}

const char* kLockstepStep = "{fixed_s: 0.01, per_token_s: 0.0001, per_seq_s: 0.001}";

}  // namespace

// vLLM's DPLBAsyncMPClient.get_core_engine_for_request, on the router alone: score 4 x waiting +
// running, the first minimum from index 0 wins, the chosen engine's waiting bumped by 1 until
// the next published counts replace them.
TEST_CASE("dp_balance: the lowest 4 x waiting + running, first on ties, bumped until published",
          "[engine][cluster][dp]") {
  auto router = dp_router("{type: dp_balance}");
  CHECK(router->stats_interval() == ms(100));
  std::vector<ReplicaView> views(2);
  const RequestSpec spec;
  // Nothing published yet: both (0, 0). Scores 0, 0: a tie, rank 0; it becomes waiting 1.
  CHECK(router->route(spec, views) == 0);
  CHECK(router->route(spec, views) == 1);  // scores 4, 0
  CHECK(router->route(spec, views) == 0);  // scores 4, 4: the first; rank 0 now waiting 2
  // Published: rank 0 waiting 0 running 3 (score 3), rank 1 waiting 1 running 0 (score 4). The
  // counts the router read from `views` at arrival (the fresh ones) play no part.
  views[0].waiting = 0, views[0].running = 3;
  views[1].waiting = 1, views[1].running = 0;
  router->on_stats(views);
  views[0].running = 100;                  // fresh, unpublished: ignored
  CHECK(router->route(spec, views) == 0);  // 3 < 4; rank 0 bumped to waiting 1: 7
  CHECK(router->route(spec, views) == 1);  // 7 > 4; rank 1 bumped to waiting 2: 8
  CHECK(router->route(spec, views) == 0);  // 7 < 8
  // A replica that is down is never chosen, whatever its score; none up: -1.
  views[0].up = false;
  CHECK(router->route(spec, views) == 1);
  views[1].up = false;
  CHECK(router->route(spec, views) == -1);
}

// The counts a stale publish carries, in a run (two independent ranks, every step 10 ms).
// Requests (arrival, prompt, output): A 0 s/100/12, B 0.01/100/100, C 0.05/100/7, D 0.15/100/1,
// E 0.16/100/1.
//   A at 0:     nothing published, (0,0) (0,0): rank 0 (tie). Its arrival publishes at once,
//               before rank 0's first step: rank 0 waiting 1, rank 1 empty. Next publish 0.1 s.
//   B at 0.01:  scores 4, 0: rank 1.                       (bump: rank 1 waiting 1)
//   C at 0.05:  scores 4, 4: rank 0, the first.
//   0.1 s:      published: rank 0 runs A and C (score 2), rank 1 runs B (score 1).
//   A's 12 tokens: steps from 0 to 0.12 s; C's 7: prefill at 0.05, its last token at 0.12 s: at
//   0.12 rank 0 is empty, but no publish comes before 0.2 s.
//   D at 0.15:  published scores 2, 1: rank 1 (the fresh counts, 0 and 1, would say rank 0).
//   E at 0.16:  2 against 1 + 4 (D's bump): rank 0.
// Rank 0 gets A, C, E; rank 1 B, D. least_outstanding, which sees each finish at once, gives
// D to rank 0 (0 against 1 outstanding) and E too (1, 1: the first): rank 0 A, C, D, E.
TEST_CASE("dp_balance routes by the counts published every 100 ms, not the fresh ones",
          "[engine][cluster][dp]") {
  const std::vector<Arrival> arrivals = {
      {0.0, 100, 12}, {0.01, 100, 100}, {0.05, 100, 7}, {0.15, 100, 1}, {0.16, 100, 1}};
  const DpRun dp = drive("{fixed_s: 0.01}", "{type: dp_balance}", std::nullopt, arrivals);
  CHECK(dp.done.at(0).finished_at == ms(120));
  CHECK(dp.done.at(2).finished_at == ms(120));
  CHECK(dp.per_rank == std::vector<int64_t>{3, 2});
  const DpRun lo = drive("{fixed_s: 0.01}", "{type: least_outstanding}", std::nullopt, arrivals);
  CHECK(lo.per_rank == std::vector<int64_t>{4, 1});
}

// Two lockstep ranks (round robin: ids 0, 2 and 4 on rank 0, 1 and 3 on rank 1). Steps: 10 ms
// + 0.1 ms a token + 1 ms a sequence; CUDA graphs up to 512 tokens, so every rank pads to the
// largest rank's tokens; a rank with nothing scheduled runs a dummy forward of 1 token and 1
// sequence padded likewise.
//   ids 0 and 2 (0 s, prompt 10, 1 token) on rank 0; id 1 (0 s, prompt 100, 3 tokens) on rank 1:
//   step 1 [0, 22]: rank 1 prefills 100 tokens, 1 sequence: 21 ms; rank 0 prefills 20 tokens, 2
//          sequences (14 ms) padded to 100 tokens (+ 80 x 0.1 = 8 ms): 22 ms, the slower. ids 0
//          and 2 finish at 22 ms (alone: 14 ms).
//   steps 2, 3 [22, 33.1], [33.1, 44.2]: rank 1 decodes id 1 (11.1 ms), rank 0 a dummy (11.1
//          ms). id 1 finishes at 44.2 ms (alone: 21 + 2 x 11.1 = 43.2 ms).
//   steps 4-32: no work anywhere, but the group checks only every 32nd step: dummy steps of
//          11.1 ms on both ranks; step k >= 4 starts at 44.2 + (k - 4) x 11.1 ms.
//   id 3 (0.1 s, prompt 50, 1 token) reaches rank 1 in step 9 [99.7, 110.8] and is prefilled in
//          step 10 [110.8, 126.8] (16 ms; rank 0's dummy padded to 50 tokens: 16 ms): E2E 26.8 ms
//          (alone: 16 ms). Steps 11-32: 22 x 11.1 ms to 371.0 ms: the wave ends.
//   id 4 (0.5 s, prompt 10, 1 token, rank 0): a new wave at once: step 1 [500, 512] (12 ms; rank
//          1's dummy padded to 10 tokens: 12 ms): E2E 12 ms; then 31 dummy steps: the last event
//          at 512 + 31 x 11.1 = 856.1 ms.
// Steps 32 + 32. Dummy forwards: wave 1: steps 2, 3 (1 each) and 4-32 (2 each, step 10 1) = 2 +
// 57; wave 2: step 1 (1) + 31 x 2 = 63: 122 in all.
TEST_CASE("lockstep ranks: the slower padded step, dummy forwards, the 32-step tail, waves",
          "[engine][cluster][dp]") {
  const std::vector<Arrival> arrivals = {
      {0.0, 10, 1}, {0.0, 100, 3}, {0.0, 10, 1}, {0.1, 50, 1}, {0.5, 10, 1}};
  const DpRun r = drive(kLockstepStep, "{type: round_robin}", LockstepOptions{}, arrivals);
  REQUIRE(r.done.size() == 5);
  CHECK(e2e(r, 0) == ms(22));
  CHECK(e2e(r, 2) == ms(22));
  CHECK(r.done.at(1).first_token_at == ms(22));
  CHECK(e2e(r, 1) == ms(44.2));
  CHECK(r.done.at(3).first_token_at == ms(126.8));
  CHECK(e2e(r, 3) == ms(26.8));
  CHECK(e2e(r, 4) == ms(12));
  CHECK(r.end == ms(856.1));
  CHECK(r.stats.steps == 64);
  CHECK(r.stats.waves == 2);
  CHECK(r.stats.dummy_forwards == 122);
  // The same ranks on their own: no padding, no dummy, no tail.
  const DpRun free = drive(kLockstepStep, "{type: round_robin}", std::nullopt, arrivals);
  CHECK(e2e(free, 0) == ms(14));
  CHECK(e2e(free, 1) == ms(43.2));
  CHECK(e2e(free, 3) == ms(16));
  CHECK(e2e(free, 4) == ms(12));
  CHECK(free.end == ms(512));
  // CUDA graphs only up to 50 tokens: rank 1's 100 tokens run eager, so no rank pads: step 1
  // lasts the slower rank's own 21 ms.
  const DpRun eager = drive(kLockstepStep, "{type: round_robin}",
                            LockstepOptions{.graph_max_tokens = 50}, arrivals);
  CHECK(e2e(eager, 0) == ms(21));
  CHECK(eager.done.at(1).first_token_at == ms(21));
}

// Which replica groups step in lockstep: auto follows vLLM (MoE and data_parallel > 1).
TEST_CASE("lockstep groups: auto for MoE with data_parallel > 1, runs of data_parallel replicas",
          "[engine][cluster][dp]") {
  ReplicaGroupConfig g;
  g.count = 4;
  EngineConfig e;
  e.data_parallel = 2;
  e.max_num_seqs = 128;
  e.max_num_batched_tokens = 2048;
  const auto moe = lockstep_groups(g, true, e, 3);
  REQUIRE(moe.size() == 2);
  CHECK(moe[0].ranks == std::vector<size_t>{3, 4});
  CHECK(moe[1].ranks == std::vector<size_t>{5, 6});
  // vLLM's largest capture size: min(128 x 2, 512, 2048) = 256; with 64 seqs and a budget of
  // 100 tokens: min(128, 512, 100) = 100.
  CHECK(moe[0].options.graph_max_tokens == 256);
  e.max_num_seqs = 64;
  e.max_num_batched_tokens = 100;
  CHECK(lockstep_groups(g, true, e, 0).at(0).options.graph_max_tokens == 100);
  CHECK(lockstep_groups(g, false, e, 0).empty());  // dense: independent engines
  e.data_parallel = 1;
  CHECK(lockstep_groups(g, true, e, 0).empty());  // no DP
  e.data_parallel = 8;
  g.count = 1;
  CHECK(lockstep_groups(g, true, e, 0).empty());  // one rank standing for all eight
  e.data_parallel = 2;
  g.count = 2;
  g.lockstep = ReplicaGroupConfig::Lockstep::kOff;
  CHECK(lockstep_groups(g, true, e, 0).empty());
}

// Dense DP: the same run with lockstep auto (no group: the model is dense) and lockstep off,
// byte for byte; and `lockstep: true` where it cannot be is an error at its line.
TEST_CASE("dense data parallelism stays independent engines; bad lockstep settings are errors",
          "[engine][cluster][dp]") {
  const auto scenario = [](const std::string& group) {
    return fmt::format(R"(
name: dense-dp
model: llama-3-8b
gpu: h100-sxm
engine: {{data_parallel: 2, max_model_len: 4096}}
cluster:
  replicas:
    - {{name: dp, {}}}
  router: {{type: dp_balance}}
workload:
  arrivals: {{type: poisson, rate: 20}}
  max_requests: 60
  prompt_tokens: {{type: uniform, min: 100, max: 1500}}
  output_tokens: {{type: uniform, min: 10, max: 200}}
policies: [{{name: p, guards: []}}]
)",
                       group);
  };
  namespace fs = std::filesystem;
  const fs::path a = kvsim::test::fresh_dir("dense-dp-auto"),
                 b = kvsim::test::fresh_dir("dense-dp-off");
  RunOptions o;
  o.out_dir = a.string();
  run_scenario(
      load_scenario(ConfigNode::parse_string(scenario("count: 2"), "a.yaml"), Catalog::builtin()),
      o);
  o.out_dir = b.string();
  run_scenario(load_scenario(ConfigNode::parse_string(
                                 scenario("count: 2, data_parallel: {lockstep: false}"), "b.yaml"),
                             Catalog::builtin()),
               o);
  const std::string req_a = kvsim::test::file_text(a / "requests.csv");
  CHECK(!req_a.empty());
  CHECK(req_a == kvsim::test::file_text(b / "requests.csv"));
  fs::remove_all(a);
  fs::remove_all(b);
  CHECK_THAT(kvsim::test::prepare_error(scenario("count: 3, data_parallel: {lockstep: true}")),
             Catch::Matchers::Contains("bad.yaml:") && Catch::Matchers::Contains("lockstep needs"));
  CHECK_THAT(kvsim::test::prepare_error(scenario("count: 2, data_parallel: {lockstep: sometimes}")),
             Catch::Matchers::Contains("bad.yaml:"));
}
