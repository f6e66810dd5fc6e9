// Scheduler contract (sim/serving/scheduler.h): one body runs over every scheduler in
// scheduler_registry(), so a new scheduler gets the whole suite for free. Each registered
// scheduler is wrapped in a checking scheduler and driven by a real Replica through seeded random
// traffic under memory pressure (preemption by recompute and by swap, chunked prefill, OOM abort
// and crash). The contract:
//   - a plan never exceeds the limits it is given (sequences; tokens, but for one whole prompt
//     longer than the budget, which runs alone), and never changes them;
//   - a plan names each request at most once, prefill chunks are positive;
//   - an idle replica plans nothing;
//   - every request ends in exactly one outcome, and the run ends (no iteration is scheduled
//     for nothing).
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>

#include <fmt/format.h>
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

struct PlanLog {
  int64_t plans = 0;
  int64_t nonempty = 0;
  std::vector<std::string> violations;  // the first few
  const Replica* replica = nullptr;     // set once the replica exists

  void violate(std::string what) {
    if (violations.size() < 5) violations.push_back(std::move(what));
  }
};

// Wraps a registered scheduler; checks every plan it makes against the limits it was given.
class CheckedScheduler final : public Scheduler {
 public:
  CheckedScheduler(std::unique_ptr<Scheduler> inner, PlanLog& log)
      : inner_(std::move(inner)), log_(log) {}

  bool plan(IterationPlan& it, const BatchLimits& limits, PlanSteps& steps) const override {
    const BatchLimits given = limits;
    if (!it.empty()) log_.violate("a plan started non-empty");
    const bool idle = log_.replica != nullptr && log_.replica->idle();
    const bool ok = inner_->plan(it, limits, steps);
    ++log_.plans;
    if (!(limits == given)) log_.violate("the plan changed its limits");
    if (!ok) return ok;  // an OOM ended it: the replica discards the plan
    if (!it.empty()) ++log_.nonempty;
    if (idle && !it.empty()) log_.violate("an idle replica planned work");
    const int64_t seqs = static_cast<int64_t>(it.prefill_ids.size() + it.decode.size());
    if (seqs > limits.max_num_seqs) {
      log_.violate(fmt::format("{} sequences > max_num_seqs {}", seqs, limits.max_num_seqs));
    }
    // A decode's drafts count against the budget too (speculative decoding), and so do requests
    // a speculating async plan runs after the step before finished them.
    int64_t tokens = static_cast<int64_t>(it.decode.size()) + it.spec_tokens + it.finished_tokens();
    for (int64_t c : it.prefill_chunks) {
      if (c < 1) log_.violate(fmt::format("a prefill chunk of {} tokens", c));
      tokens += c;
    }
    // One whole prompt longer than the budget may run alone (a scheduler that does not chunk,
    // or the static scheduler, which prefills whole prompts whatever chunked_prefill says).
    const bool alone = it.prefill_ids.size() == 1;
    if (tokens > limits.max_num_batched_tokens && !alone) {
      log_.violate(fmt::format("{} tokens > max_num_batched_tokens {}", tokens,
                               limits.max_num_batched_tokens));
    }
    std::set<int64_t> ids(it.prefill_ids.begin(), it.prefill_ids.end());
    for (const RequestState* r : it.decode) ids.insert(r->spec.id);
    if (static_cast<int64_t>(ids.size()) != seqs) log_.violate("a request planned twice");
    return ok;
  }

 private:
  std::unique_ptr<Scheduler> inner_;
  PlanLog& log_;
};

// The steps of a replica with no request at all.
class IdleSteps final : public PlanSteps {
 public:
  bool has_running() const override { return false; }
  bool has_swapped() const override { return false; }
  bool all_running_decode() const override { return true; }
  void swap_in(IterationPlan&, const BatchLimits&) override { ++calls; }
  bool grow_decodes(IterationPlan&) override { return true; }
  bool admit_prefills(IterationPlan&, const BatchLimits&) override { return true; }
  int calls = 0;
};

struct Variant {
  std::string name;
  std::string engine;         // engine: YAML (the scheduler comes from the registry entry)
  std::string kv;             // kv: YAML
  int64_t spare_bytes;        // GPU memory beyond weights, context and workspace; 0 = the GPU's own
  std::string guards = "[]";  // the policy's guards: YAML list
  bool continuous_only = false;  // settings the other schedulers refuse (speculative decoding)
};

const Variant kVariants[] = {
    {"paged, recompute", "{max_num_seqs: 6, batch_size: 6, max_num_batched_tokens: 2048}",
     "{type: paged, block_size: 16, num_blocks: 96}", 0},
    {"paged, swap, chunked",
     "{max_num_seqs: 6, batch_size: 6, max_num_batched_tokens: 512, chunked_prefill: true, "
     "preemption: swap, swap_space_gb: 0.05}",
     "{type: paged, block_size: 16, num_blocks: 96}", 0},
    {"paged, preemption off",
     "{max_num_seqs: 4, batch_size: 4, max_num_batched_tokens: 1024, preemption: off, "
     "on_oom: abort_request}",
     "{type: paged, block_size: 16, num_blocks: 128}", 0},
    {"caching allocator, abort",
     "{max_num_seqs: 10, batch_size: 10, max_num_batched_tokens: 4096, on_oom: abort_request}",
     "{type: caching_allocator, growth: chunked, chunk_tokens: 64}", int64_t{700} << 20},
    {"caching allocator, crash",
     "{max_num_seqs: 10, batch_size: 10, max_num_batched_tokens: 4096, restart_s: 1}",
     "{type: caching_allocator, growth: concat}", int64_t{700} << 20},
    {"contiguous, waits", "{max_num_seqs: 12, batch_size: 12, max_num_batched_tokens: 4096}",
     "{type: contiguous, reserve: pow2, gpu_memory_utilization: 0.99}", int64_t{1200} << 20},
    // The scheduling policies' queue orders and victims, and the scheduler-side watermark.
    {"paged, priority, watermark",
     "{max_num_seqs: 6, batch_size: 6, max_num_batched_tokens: 2048, scheduling_policy: priority}",
     "{type: paged, block_size: 16, num_blocks: 96}", 0, "[{type: watermark, watermark: 0.05}]"},
    {"paged, swap, chunked, priority",
     "{max_num_seqs: 6, batch_size: 6, max_num_batched_tokens: 512, chunked_prefill: true, "
     "preemption: swap, swap_space_gb: 0.05, scheduling_policy: priority}",
     "{type: paged, block_size: 16, num_blocks: 96}", 0},
    {"paged, swap, shortest prompt first",
     "{max_num_seqs: 6, batch_size: 6, max_num_batched_tokens: 2048, preemption: swap, "
     "swap_space_gb: 0.05, scheduling_policy: shortest_prompt_first}",
     "{type: paged, block_size: 16, num_blocks: 96}", 0},
    // Speculative decoding (continuous only): 1 + k tokens of the budget a decode, lookahead
    // slots, a small budget that cuts drafts, preemption by swap, async scheduling.
    {"paged, swap, chunked, speculative",
     "{max_num_seqs: 6, max_num_batched_tokens: 12, chunked_prefill: true, preemption: swap, "
     "swap_space_gb: 0.05, speculative_config: {method: eagle, num_speculative_tokens: 4, "
     "acceptance_per_position: [0.8, 0.6, 0.4, 0.2]}}",
     "{type: paged, block_size: 16, num_blocks: 160}", 0, "[]", true},
};

// Runs `count` seeded requests through a replica driven by `scheduler_name`, checking plans.
void run_contract(const std::string& scheduler_name, const Variant& v, uint64_t seed) {
  spdlog::set_level(spdlog::level::warn);  // OOMs are expected here; their log lines are not
  const Catalog& catalog = Catalog::builtin();
  const ModelSpec model = catalog.model("llama-3-8b");
  GpuSpec gpu = catalog.gpu("a100-sxm4-80gb");
  const EngineConfig config =
      parse_engine_config(ConfigNode::parse_string(v.engine, "engine.yaml"));
  const PoolOptions options{.workspace_bytes = config.workspace_bytes,
                            .attention = config.attention,
                            .profile_batched_tokens = config.max_num_batched_tokens,
                            .profile_num_seqs = config.max_num_seqs};
  if (v.spare_bytes > 0) {
    const KvBudget b = GpuMemoryPool::budget_for(model, gpu, options);
    gpu.memory_bytes = b.context_bytes + b.weights_bytes + b.workspace_bytes + v.spare_bytes;
  }
  GpuMemoryPool pool(model, gpu, ConfigNode::parse_string(v.kv, "kv.yaml"), options);
  const LatencyModel latency(model, gpu, default_profile(gpu), config.attention);
  EventQueue events(EventQueue::Limits{.max_events = 10'000'000});
  Recorder recorder(scheduler_name);
  PlanLog log;
  const auto* entry = scheduler_registry().find(scheduler_name);
  REQUIRE(entry != nullptr);
  Replica replica(events, pool, latency, config,
                  make_guards(ConfigNode::parse_string(v.guards, "guards.yaml"), model, "paged"),
                  recorder, std::make_unique<CheckedScheduler>(entry->make(), log));
  log.replica = &replica;
  replica.set_check_invariants(true);
  std::map<int64_t, int> outcomes;  // id -> outcomes seen
  replica.set_on_finished([&](const RequestState& r) { ++outcomes[r.spec.id]; });

  std::mt19937_64 g(seed);
  std::mt19937_64 priorities(seed + 1000);  // its own stream: the others' traffic is unchanged
  constexpr int64_t kRequests = 60;
  SimTime at = 0;
  for (int64_t id = 0; id < kRequests; ++id) {
    RequestSpec spec;
    spec.id = id;
    at += static_cast<SimTime>(g() % 400) * kNsPerSecond / 1000;  // 0-400 ms apart
    spec.arrival = at;
    spec.prompt_tokens = 1 + static_cast<int64_t>(g() % 1200);
    spec.output_tokens = 1 + static_cast<int64_t>(g() % 300);
    spec.priority = static_cast<int64_t>(priorities() % 3);
    events.schedule_at(at, [&replica, spec] { replica.arrive(spec); });
  }
  events.run();
  replica.finish();

  INFO("scheduler " << scheduler_name << ", " << v.name << ", seed " << seed);
  std::string violations;
  for (const std::string& s : log.violations) violations += s + "; ";
  INFO(violations);
  CHECK(log.violations.empty());
  CHECK(log.nonempty > 0);
  CHECK(replica.idle());
  CHECK(events.empty());
  CHECK(static_cast<int64_t>(outcomes.size()) == kRequests);
  CHECK(std::all_of(outcomes.begin(), outcomes.end(), [](const auto& o) { return o.second == 1; }));
  const PolicySummary summary = recorder.finish(events.now());
  int64_t ended = 0;
  for (int64_t n : summary.outcomes) ended += n;
  CHECK(ended == kRequests);
}

}  // namespace

TEST_CASE("every scheduler is registered once, continuous first", "[contract][scheduler]") {
  const std::vector<std::string> names = scheduler_registry().names();
  REQUIRE(names.size() >= 2);
  CHECK(names[0] == "continuous");
  CHECK(std::find(names.begin(), names.end(), "static") != names.end());
  CHECK(std::find(names.begin(), names.end(), "vllm_v0") != names.end());
  for (const auto& e : scheduler_registry().entries()) {
    INFO(e.name);
    CHECK(!e.description.empty());
    CHECK(e.make() != nullptr);
  }
}

TEST_CASE("an idle replica plans nothing, with every scheduler", "[contract][scheduler]") {
  for (const auto& e : scheduler_registry().entries()) {
    INFO(e.name);
    const auto scheduler = e.make();
    IdleSteps steps;
    IterationPlan it;
    const BatchLimits limits;
    CHECK(scheduler->plan(it, limits, steps));
    CHECK(it.empty());
    CHECK(steps.calls == 0);  // nothing swapped: nothing to swap in
  }
}

TEST_CASE("every scheduler keeps its limits and ends every request once", "[contract][scheduler]") {
  const uint64_t seed = GENERATE(range(0, 4));
  for (const auto& e : scheduler_registry().entries()) {
    for (const Variant& v : kVariants) {
      if (!v.continuous_only || e.name == "continuous") run_contract(e.name, v, seed);
    }
  }
}
