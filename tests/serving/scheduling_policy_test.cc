// Worked out by hand: vLLM's scheduler-side watermark, the scheduling
// policies (fcfs, priority, shortest_prompt_first) and vLLM V0's step rule (scheduler vllm_v0).
// Each case drives a Replica directly with RequestSpecs (priorities need no trace column) and
// records every plan the replica runs through a wrapping scheduler, so the expected plans are
// derived step by step in the comments: which requests prefill, which decode.
//
// Common facts: a paged store of 16-token blocks; a request holds ceil(tokens / 16) blocks; a
// whole prompt of P tokens yields the first output token in the step that prefills it, and each
// later step adds one (so output_tokens O take 1 prefill step and O - 1 decode steps). Llama-3-8B
// on an A100-80GB: every step reads the 16 GB of weights (>= 16e9 / 2.04e12 B/s = 7.8 ms) and a
// prefill of 630 tokens needs 2 x 8e9 x 630 = 1.0e13 FLOP (>= 32 ms at the 312 TFLOP/s peak), so
// requests arriving within 7 ms of it are all waiting when it ends.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/config_node.h"
#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "models/memory/gpu_memory_pool.h"
#include "sim/engine/event_queue.h"
#include "sim/guards/guard.h"
#include "sim/metrics/recorder.h"
#include "sim/serving/engine_config.h"
#include "sim/serving/replica.h"
#include "sim/serving/scheduler.h"

using namespace kvsim;

namespace {

// One step as run: the ids prefilled and the ids decoded, each sorted.
struct Step {
  std::vector<int64_t> prefill;
  std::vector<int64_t> decode;
  bool operator==(const Step&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Step& s) {
  os << "P{";
  for (int64_t id : s.prefill) os << id << ",";
  os << "} D{";
  for (int64_t id : s.decode) os << id << ",";
  return os << "}";
}

// Wraps a registered scheduler and records each non-empty plan it returns (the replica runs it;
// an empty one makes the replica break a wait and plan again).
class RecordingScheduler final : public Scheduler {
 public:
  RecordingScheduler(std::unique_ptr<Scheduler> inner, std::vector<Step>& steps)
      : inner_(std::move(inner)), steps_(steps) {}
  bool plan(IterationPlan& it, const BatchLimits& limits, PlanSteps& steps) const override {
    const bool ok = inner_->plan(it, limits, steps);
    if (ok && !it.empty()) {
      Step s{.prefill = it.prefill_ids, .decode = {}};
      for (const RequestState* r : it.decode) s.decode.push_back(r->spec.id);
      std::sort(s.prefill.begin(), s.prefill.end());
      std::sort(s.decode.begin(), s.decode.end());
      steps_.push_back(std::move(s));
    }
    return ok;
  }

 private:
  std::unique_ptr<Scheduler> inner_;
  std::vector<Step>& steps_;
};

struct Arrival {
  double at_s;
  int64_t prompt;
  int64_t output;
  int64_t priority = 0;
};

struct Run {
  std::vector<Step> steps;
  PolicySummary summary;
  std::map<int64_t, RequestState> done;  // by id, as each one finished
};

// Runs `arrivals` (ids 0, 1, ... in order) through one replica of Llama-3-8B on an A100-80GB.
Run drive(const std::string& engine, const std::string& kv, const std::string& guards,
          const std::vector<Arrival>& arrivals) {
  spdlog::set_level(spdlog::level::warn);
  const Catalog& catalog = Catalog::builtin();
  const ModelSpec model = catalog.model("llama-3-8b");
  const GpuSpec gpu = catalog.gpu("a100-sxm4-80gb");
  const EngineConfig config = parse_engine_config(ConfigNode::parse_string(engine, "engine.yaml"));
  const PoolOptions options{.workspace_bytes = config.workspace_bytes,
                            .attention = config.attention,
                            .profile_batched_tokens = config.max_num_batched_tokens,
                            .profile_num_seqs = config.max_num_seqs};
  GpuMemoryPool pool(model, gpu, ConfigNode::parse_string(kv, "kv.yaml"), options);
  const LatencyModel latency(model, gpu, default_profile(gpu), config.attention);
  EventQueue events;
  Recorder recorder("p");
  Run run;
  const auto* entry = scheduler_registry().find(config.scheduler);
  REQUIRE(entry != nullptr);
  Replica replica(events, pool, latency, config,
                  make_guards(ConfigNode::parse_string(guards, "guards.yaml"), model, "paged"),
                  recorder, std::make_unique<RecordingScheduler>(entry->make(), run.steps));
  replica.set_check_invariants(true);
  replica.set_on_finished([&](const RequestState& r) { run.done.emplace(r.spec.id, r); });
  for (size_t i = 0; i < arrivals.size(); ++i) {
    RequestSpec spec;
    spec.id = static_cast<int64_t>(i);
    spec.arrival = seconds_to_sim(arrivals[i].at_s);
    spec.prompt_tokens = arrivals[i].prompt;
    spec.output_tokens = arrivals[i].output;
    spec.priority = arrivals[i].priority;
    events.schedule_at(spec.arrival, [&replica, spec] { replica.arrive(spec); });
  }
  events.run();
  replica.finish();
  run.summary = recorder.finish(events.now());
  return run;
}

int64_t completed(const Run& r) {
  return static_cast<int64_t>(std::count_if(r.done.begin(), r.done.end(), [](const auto& d) {
    return d.second.outcome == Outcome::kCompleted;
  }));
}

const char* kHundredBlocks = "{type: paged, block_size: 16, num_blocks: 100}";

// The watermark case: 100 blocks, watermark 0.1 (M = 10 blocks); requests (arrival s,
// prompt, output): 0: 0.0/630/5, 1: 0.005/320/5, 2: 0.006/320/5, 3: 0.007/320/5. Blocks:
// ceil(630/16) = 40, ceil(320/16) = 20.
const std::vector<Arrival> kRepro = {
    {0.0, 630, 5}, {0.005, 320, 5}, {0.006, 320, 5}, {0.007, 320, 5}};

}  // namespace

// vLLM's way (check_at: schedule, the default). Step 1 prefills 0 (free 100 - 40 = 60 >= 10).
// Requests 1-3 arrive during it. Step 2: 0 decodes (631 tokens: still 40 blocks); 1 is checked
// with 60 free: 60 - 20 = 40 >= 10, allocated (free 40); 2: 40 - 20 = 20 >= 10 (free 20); 3:
// 20 - 20 = 0 < 10, LATER: admission stops. Step 3: 1 and 2 reach 321 tokens, one block each
// (free 18); 3: 18 - 20 < 10, held. Steps 4, 5 the same; 0 makes its 5th token in step 5 (1 in
// step 1, then one per step) and frees 40 (free 58). Step 6: 1 and 2 decode their 5th token; 3:
// 58 - 20 = 38 >= 10, prefilled. Steps 7-10: 3 decodes tokens 2-5. Ten steps, no preemption.
TEST_CASE("the watermark is checked by the scheduler, after the step's allocations",
          "[engine][scheduling]") {
  const Run r = drive("{}", kHundredBlocks, "[{type: watermark, watermark: 0.1}]", kRepro);
  const std::vector<Step> expected = {
      {{0}, {}},     {{1, 2}, {0}}, {{}, {0, 1, 2}}, {{}, {0, 1, 2}}, {{}, {0, 1, 2}},
      {{3}, {1, 2}}, {{}, {3}},     {{}, {3}},       {{}, {3}},       {{}, {3}}};
  CHECK(r.steps == expected);
  CHECK(r.summary.preemptions == 0);
  CHECK(r.summary.iterations == 10);
  CHECK(completed(r) == 4);
}

// kvsim's earlier variant, kept as check_at: arrival. At 0.005, 0.006 and 0.007 s the guard sees
// the free blocks of that moment, 60 (nothing allocated for the others yet): all three pass.
// Step 2 allocates 1, 2, 3 (free 0). Step 3: 0 decodes within its blocks; 1 needs a 21st block,
// none is free: the newest running request, 3, is preempted (free 20), then 1 and 2 take one
// each (free 18); 3 (321 tokens to recompute: 21 blocks) does not fit. Steps 4, 5: 0, 1, 2; 0
// ends (free 58). Step 6: 1 and 2 make their last token, 3 is prefilled again (its 2nd token);
// steps 7-9: its tokens 3-5. Nine steps, one preemption.
TEST_CASE("the arrival-time watermark variant admits the fourth and preempts it",
          "[engine][scheduling]") {
  const Run r =
      drive("{}", kHundredBlocks, "[{type: watermark, watermark: 0.1, check_at: arrival}]", kRepro);
  const std::vector<Step> expected = {{{0}, {}},       {{1, 2, 3}, {0}}, {{}, {0, 1, 2}},
                                      {{}, {0, 1, 2}}, {{}, {0, 1, 2}},  {{3}, {1, 2}},
                                      {{}, {3}},       {{}, {3}},        {{}, {3}}};
  CHECK(r.steps == expected);
  CHECK(r.summary.preemptions == 1);
  REQUIRE(r.done.count(3));
  CHECK(r.done.at(3).preemptions == 1);
  CHECK(completed(r) == 4);
}

// NEVER: with 100 blocks and M = 10, a prompt of 91 blocks (1,456 tokens) leaves 100 - 91 = 9 < 10
// even in an empty pool: rejected_too_long when the scheduler reaches it. 90 blocks (1,440
// tokens) leave exactly 10: it is served.
TEST_CASE("the scheduler-side watermark rejects what can never keep the mark",
          "[engine][scheduling]") {
  const Run r = drive("{}", kHundredBlocks, "[{type: watermark, watermark: 0.1}]",
                      {{0.0, 1456, 2}, {1.0, 1440, 2}});
  REQUIRE(r.done.size() == 2);
  CHECK(r.done.at(0).outcome == Outcome::kRejectedTooLong);
  CHECK(r.done.at(1).outcome == Outcome::kCompleted);
  const std::vector<Step> expected = {{{1}, {}}, {{}, {1}}};
  CHECK(r.steps == expected);
}

TEST_CASE("timeout_s on a scheduler-side watermark is a config error at the key",
          "[engine][scheduling][config]") {
  CHECK_THROWS_WITH(drive("{}", kHundredBlocks, "[{type: watermark, timeout_s: 5}]", kRepro),
                    Catch::Matchers::Contains("guards.yaml:1:31: [0].timeout_s: applies only "
                                              "with check_at: arrival"));
}

// Three requests of 100 + 2 tokens arrive together with priorities 2, 0, 1; max_num_seqs 1, so
// each runs alone (prefill, then one decode). priority serves 1, 2, 0; fcfs 0, 1, 2;
// shortest_prompt_first, all prompts equal, falls back to arrival (then id): 0, 1, 2.
TEST_CASE("priority serves the waiting queue by priority, then arrival", "[engine][scheduling]") {
  const std::vector<Arrival> three = {{0.0, 100, 2, 2}, {0.0, 100, 2, 0}, {0.0, 100, 2, 1}};
  const auto order = [](const Run& r) {
    std::vector<int64_t> ids;
    for (const Step& s : r.steps) ids.insert(ids.end(), s.prefill.begin(), s.prefill.end());
    return ids;
  };
  const Run prio =
      drive("{max_num_seqs: 1, scheduling_policy: priority}", kHundredBlocks, "[]", three);
  CHECK(order(prio) == std::vector<int64_t>{1, 2, 0});
  CHECK(prio.summary.iterations == 6);
  const Run fcfs = drive("{max_num_seqs: 1}", kHundredBlocks, "[]", three);
  CHECK(order(fcfs) == std::vector<int64_t>{0, 1, 2});
  const Run spf = drive("{max_num_seqs: 1, scheduling_policy: shortest_prompt_first}",
                        kHundredBlocks, "[]", three);
  CHECK(order(spf) == std::vector<int64_t>{0, 1, 2});
}

// Prompts 300, 100, 200 (priorities 0, 1, 2), together, max_num_seqs 1: shortest_prompt_first
// serves 1, 2, 0 (priority would serve 0, 1, 2).
TEST_CASE("shortest_prompt_first serves the shortest prompt first", "[engine][scheduling]") {
  const std::vector<Arrival> three = {{0.0, 300, 2, 0}, {0.0, 100, 2, 1}, {0.0, 200, 2, 2}};
  const Run spf = drive("{max_num_seqs: 1, scheduling_policy: shortest_prompt_first}",
                        kHundredBlocks, "[]", three);
  const std::vector<Step> expected = {{{1}, {}}, {{}, {1}}, {{2}, {}},
                                      {{}, {2}}, {{0}, {}}, {{}, {0}}};
  CHECK(spf.steps == expected);
  const Run prio =
      drive("{max_num_seqs: 1, scheduling_policy: priority}", kHundredBlocks, "[]", three);
  CHECK(prio.steps.front() == Step{{0}, {}});
}

// 4 blocks; three prompts of 16 tokens (one block each), 3 output tokens, priorities 0, 5, 1,
// together. Step 1 prefills all three (free 1); each now needs a 2nd block for its 17th token.
// Step 2, priority: 0 takes the last block; 1 finds none; the victim is the largest (priority,
// arrival): 1 itself (priority 5), preempted (free 1); 2 takes that block. 1 (17 tokens: 2 blocks)
// cannot come back. Step 3: 0 and 2 decode their 3rd token and end (free 4). Step 4: 1 is
// prefilled again (its 2nd token), step 5 its 3rd. Under fcfs the victim in step 2 is the newest,
// 2, and 1 takes its block: steps 2, 3 decode 0 and 1, steps 4, 5 serve 2.
TEST_CASE("priority preempts the lowest priority, fcfs the newest", "[engine][scheduling]") {
  const std::vector<Arrival> three = {{0.0, 16, 3, 0}, {0.0, 16, 3, 5}, {0.0, 16, 3, 1}};
  const char* four = "{type: paged, block_size: 16, num_blocks: 4}";
  const Run prio = drive("{scheduling_policy: priority}", four, "[]", three);
  const std::vector<Step> by_priority = {
      {{0, 1, 2}, {}}, {{}, {0, 2}}, {{}, {0, 2}}, {{1}, {}}, {{}, {1}}};
  CHECK(prio.steps == by_priority);
  CHECK(prio.summary.preemptions == 1);
  CHECK(prio.done.at(1).preemptions == 1);
  const Run fcfs = drive("{}", four, "[]", three);
  const std::vector<Step> newest = {
      {{0, 1, 2}, {}}, {{}, {0, 1}}, {{}, {0, 1}}, {{2}, {}}, {{}, {2}}};
  CHECK(fcfs.steps == newest);
  CHECK(fcfs.summary.preemptions == 1);
  CHECK(fcfs.done.at(2).preemptions == 1);
}

// vllm_v0: request 0 (100 + 50 tokens) at 0 s; request 1 (100 + 1) at 0.1 s, while 0 decodes (its
// prefill takes < 0.1 s; its 49 decode steps >= 49 x 7.8 ms = 0.38 s). continuous: 1's prefill
// joins one of 0's decode steps: 1 + 49 = 50 steps. vllm_v0: the step that admits 1 runs its
// prefill alone and 0 stalls for it: 51 steps.
TEST_CASE("vllm_v0 runs a step that admits a prompt as prefill only", "[engine][scheduling]") {
  const std::vector<Arrival> two = {{0.0, 100, 50}, {0.1, 100, 1}};
  const auto step_of_1 = [](const Run& r) {
    const auto it = std::find_if(r.steps.begin(), r.steps.end(), [](const Step& s) {
      return s.prefill == std::vector<int64_t>{1};
    });
    REQUIRE(it != r.steps.end());
    return *it;
  };
  const Run cont = drive("{}", kHundredBlocks, "[]", two);
  CHECK(cont.summary.iterations == 50);
  CHECK(step_of_1(cont) == Step{{1}, {0}});
  const Run v0 = drive("{scheduler: vllm_v0}", kHundredBlocks, "[]", two);
  CHECK(v0.summary.iterations == 51);
  CHECK(step_of_1(v0) == Step{{1}, {}});
  CHECK(completed(v0) == 2);
}

// vllm_v0 with the repro's watermark: step 1 prefills 0. Step 2 admits 1 and 2 (as above: 3 is
// LATER at 20 - 20 < 10) and runs them alone: 0 stalls. Step 3 admits nothing (3: 20 - 20 < 10):
// the decodes run, 1 and 2 take their 21st blocks (free 18). Steps 4-6 the same (3: 18 - 20 <
// 10); 0 made token 1 in step 1 and tokens 2-5 in steps 3-6; 1 and 2 tokens 1 in step 2 and 2-5
// in steps 3-6: all three end with step 6 (free 100). Step 7 prefills 3, steps 8-11 decode it.
TEST_CASE("vllm_v0 decodes in the steps that admit no prompt", "[engine][scheduling]") {
  const Run r =
      drive("{scheduler: vllm_v0}", kHundredBlocks, "[{type: watermark, watermark: 0.1}]", kRepro);
  const std::vector<Step> expected = {
      {{0}, {}}, {{1, 2}, {}}, {{}, {0, 1, 2}}, {{}, {0, 1, 2}}, {{}, {0, 1, 2}}, {{}, {0, 1, 2}},
      {{3}, {}}, {{}, {3}},    {{}, {3}},       {{}, {3}},       {{}, {3}}};
  CHECK(r.steps == expected);
  CHECK(r.summary.preemptions == 0);
  CHECK(completed(r) == 4);
}

TEST_CASE("an unknown scheduling_policy is a config error at the key",
          "[engine][scheduling][config]") {
  CHECK_THROWS_WITH(
      parse_engine_config(ConfigNode::parse_string("{scheduling_policy: lifo}", "e.yaml")),
      Catch::Matchers::Contains("e.yaml:1:21: scheduling_policy"));
}
