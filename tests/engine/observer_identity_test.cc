// A request's path is readable with the fast-forward on: a request observer
// (ReplicaObserver::on_request) keeps it on and hears the same events, with the same figures, as
// when stepping; and a request's true figures (Replica::request_view: RequestState::generated_at
// and kv_tokens_held over the decode aggregate's lag) are the same in both modes at any instant,
// while its stored figures lag in the aggregate.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "models/latency/latency_model.h"
#include "sim/engine/event_queue.h"
#include "sim/serving/engine_config.h"
#include "sim/serving/replica.h"
#include "sim/timeline/request_trace.h"
#include "tests/engine/engine_test_util.h"
#include "tests/engine/random_scenario.h"

using namespace kvsim;

namespace {

// Every request's every event, one line each (id first), as the replica tells them.
class AllRequests final : public ReplicaObserver {
 public:
  bool needs_every_iteration() const override { return false; }
  void on_request(const RequestEvent& e) override {
    text +=
        fmt::format("{} {} prefilled {}/{} generated {} kv {}/{} host {} preemptions {} {}\n", e.id,
                    request_event_line(e), e.prefilled, e.prefill_target, e.generated, e.kv_tokens,
                    e.kv_blocks, e.swapped_tokens, e.preemptions, outcome_name(e.outcome));
    ++events;
    if (e.kind == RequestEventKind::kArrived) ++arrived;
    if (e.kind == RequestEventKind::kFinished) ++finished;
  }
  std::string text;
  int64_t events = 0, arrived = 0, finished = 0;
};

struct Observed {
  AllRequests all;
  PolicySummary summary;
};

Observed run_observed(const Scenario& s, bool fast_forward) {
  Observed out;
  RunOptions o;
  o.fast_forward = fast_forward;
  o.sample_interval_s = 0.37;
  o.observe = [&out](const std::string&, const std::string&) { return &out.all; };
  out.summary = run_scenario(s, o).policies.at(0);
  return out;
}

}  // namespace

TEST_CASE("a request observer hears the same events with the fast-forward on and off",
          "[property][engine][fast_forward][observer]") {
  const uint64_t seed = GENERATE(range(0, 200));
  const std::string yaml = test::random_scenario(1000 + seed, /*wide=*/true);
  INFO("seed " << 1000 + seed << "\n" << yaml);
  const Scenario s = load_scenario(ConfigNode::parse_string(yaml, "test.yaml"), Catalog::builtin());
  const Observed ff = run_observed(s, true);
  const Observed step = run_observed(s, false);
  std::filesystem::remove(test::random_trace_path(1000 + seed));
  CHECK(step.summary.fast_forward_iterations == 0);
  // Every request arrives and reaches one outcome, and the observer hears both (a prefill-only
  // hand-off has no cluster here).
  CHECK(ff.all.arrived > 0);
  CHECK(ff.all.finished == ff.all.arrived);
  CHECK(ff.all.events > 2 * ff.all.arrived);
  CHECK(ff.all.text == step.all.text);
}

// The observer does not switch the fast-forward off (a timeline's does): over the fixed sample of
// the fast-forward's own test (tests/engine/invariants_test.cc, "fast-forward stretches and quiet
// runs happen..."), observed runs still run many iterations in closed form.
TEST_CASE("a request observer keeps the fast-forward on", "[engine][fast_forward][observer]") {
  int64_t fast_forwarded = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::string yaml = test::random_scenario(1000 + seed, /*wide=*/true);
    const Scenario s =
        load_scenario(ConfigNode::parse_string(yaml, "test.yaml"), Catalog::builtin());
    fast_forwarded += run_observed(s, true).summary.fast_forward_iterations;
    std::filesystem::remove(test::random_trace_path(1000 + seed));
  }
  INFO("closed form " << fast_forwarded);
  CHECK(fast_forwarded > 1000);
}

namespace {

// Drives one replica (Llama-3-8B on an A100-80GB, 16-token blocks) with `n` requests and reads
// every request in flight every `probe_ms` of simulated time through Replica::request_view.
struct Probed {
  std::string views;
  PolicySummary summary;
};

Probed probe(bool fast_forward, int n, int64_t probe_ms) {
  spdlog::set_level(spdlog::level::warn);
  const Catalog& catalog = Catalog::builtin();
  const ModelSpec model = catalog.model("llama-3-8b");
  const GpuSpec gpu = catalog.gpu("a100-sxm4-80gb");
  EngineConfig config = parse_engine_config(ConfigNode::parse_string(
      "{kv: {type: paged, block_size: 16}, max_num_batched_tokens: 2048}", "engine.yaml"));
  config.fast_forward = fast_forward;
  const PoolOptions options{.workspace_bytes = config.workspace_bytes,
                            .attention = config.attention,
                            .profile_batched_tokens = config.max_num_batched_tokens,
                            .profile_num_seqs = config.max_num_seqs};
  GpuMemoryPool pool(model, gpu,
                     ConfigNode::parse_string("{type: paged, block_size: 16}", "kv.yaml"), options);
  const LatencyModel latency(model, gpu, default_profile(gpu), config.attention);
  EventQueue events;
  Recorder recorder("p");
  Replica replica(events, pool, latency, config, {}, recorder);
  Probed out;
  for (int i = 0; i < n; ++i) {
    RequestSpec spec;
    spec.id = i;
    spec.arrival = seconds_to_sim(0.05 * i);
    spec.prompt_tokens = 100 + 37 * i;
    spec.output_tokens = 300 + 53 * i;
    events.schedule_at(spec.arrival, [&replica, spec] { replica.arrive(spec); });
  }
  // Probes until every request is done: after the last arrival, each probe schedules the next
  // only while requests are in flight (probe times are events: the fast-forward's stretches end
  // before each, so the probe sees the iteration in flight, planned).
  std::function<void()> look = [&] {
    for (int i = 0; i < n; ++i) {
      if (const auto v = replica.request_view(i)) {
        out.views += fmt::format("t={} id={} generated={} prefilled={}/{} kv={}/{} host={}\n",
                                 events.now(), i, v->generated, v->prefilled, v->prefill_target,
                                 v->kv_tokens, v->kv_blocks, v->swapped_tokens);
      }
    }
    if (!replica.idle() || events.now() < seconds_to_sim(0.05 * n)) {
      events.schedule(probe_ms * 1'000'000, look);
    }
  };
  events.schedule_at(0, look);
  events.run();
  replica.finish();
  out.summary = recorder.finish(events.now());
  return out;
}

}  // namespace

TEST_CASE("a request's true figures are the same at any instant with the fast-forward on and off",
          "[engine][fast_forward][observer]") {
  // 12 requests, 100..507 prompt tokens and 300..883 output tokens, one every 50 ms; probed
  // every 93 ms of simulated time. A probe is an event: it sees the step in flight, planned
  // (with the fast-forward, a stretch hands that step to the event queue), and the decode
  // aggregate's members with their stored figures as of the step each last had an event of
  // its own, which request_view must advance (RunQueues::lag).
  const Probed ff = probe(true, 12, 93);
  const Probed step = probe(false, 12, 93);
  CHECK(ff.summary.fast_forward_iterations > 0);
  CHECK(step.summary.fast_forward_iterations == 0);
  CHECK(ff.views.size() > 10'000);
  CHECK(ff.views == step.views);
}
