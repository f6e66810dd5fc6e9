#include "sim/run/scenario_runner.h"

#include <chrono>
#include <type_traits>
#include <cmath>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "models/memory/gpu_memory_pool.h"
#include "models/parallelism.h"
#include "core/atomic_file.h"
#include "core/fnv1a.h"
#include "core/text_table.h"
#include "core/check.h"
#include "core/data_path.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "sim/cluster/cluster.h"
#include "sim/cluster/cluster_config.h"
#include "sim/cluster/cluster_summary.h"
#include "sim/engine/event_queue.h"
#include "sim/engine/periodic_event.h"
#include "sim/guards/guard.h"
#include "sim/metrics/slo.h"
#include "sim/metrics/summary_writer.h"
#include "sim/serving/engine_config.h"
#include "sim/serving/replica.h"
#include "sim/timeline/timeline_writer.h"
#include "workloads/workload.h"

namespace kvsim {

namespace {

// How long a closed-loop client waits after an instant failure before sending again.
constexpr SimTime kClientRetryBackoff = kNsPerSecond;

// A policy's engine: the scenario's `engine:` with the policy's own `engine:` keys on top.
// Both are read through the merged map only (peek), so it, not the originals, gets its keys
// checked; each key keeps the position and path where it was written.
// A cluster's replica group's `engine:` (`group`) goes on top of both: the group is the
// hardware (tensor_parallel on its GPUs), the same whatever the policy.
ConfigNode policy_engine(const ConfigNode& root, const ConfigNode& policy,
                         const std::optional<ConfigNode>& group = std::nullopt) {
  policy.allow({"engine"});  // read here, through the merged map
  std::vector<ConfigNode> layers;
  if (auto base = root.peek("engine")) {
    if (!base->is_map() && !base->is_null()) base->fail_expected("a map of engine settings");
    layers.push_back(*base);
  }
  if (auto over = policy.peek("engine")) {
    if (!over->is_map()) over->fail_expected("a map of engine settings");
    layers.push_back(*over);
  }
  if (group) layers.push_back(*group);
  return ConfigNode::merge(layers, policy);
}

// Policy names label the rows of requests.csv and the summaries, so they must differ. Checks
// policies[i]'s name against those before it (`seen`: name -> the first one's node).
void check_unique_name(const ConfigNode& policy, std::map<std::string, ConfigNode>& seen) {
  const ConfigNode name = policy.child("name");
  const std::string text = name.as<std::string>();
  if (auto it = seen.find(text); it != seen.end()) {
    name.fail(fmt::format("duplicate policy name '{}' (first at line {})", text, it->second.line()));
  }
  seen.emplace(text, name);
}

}  // namespace

// One replica's engine, pool, latency model and guards.
struct PreparedReplica {
  ReplicaIdentity id;  // cluster runs only
  EngineConfig engine;
  std::unique_ptr<GpuMemoryPool> pool;
  std::unique_ptr<LatencyModel> latency;
  std::vector<std::unique_ptr<Guard>> guards;
  std::optional<GpuLayoutSummary> gpu_layout;  // more than one GPU or a dtype override
};

// One policy, ready to run: built by prepare_scenario(), used up by simulate().
struct PreparedPolicy {
  std::string name;
  std::vector<PreparedReplica> replicas;  // one without a `cluster:`
  std::unique_ptr<Router> router;         // cluster runs only
  KvTransfer kv_transfer;                 // cluster runs only: the prefill-to-decode link
  std::string router_type;
  std::string model, gpu;  // the policy's own `model:` / `gpu:` names ("" when it has none)
  Workload workload;
  std::optional<SloBounds> slo;  // the scenario's `slo:` with the policy's on top
};

PreparedScenario::PreparedScenario() = default;
PreparedScenario::PreparedScenario(PreparedScenario&&) noexcept = default;
PreparedScenario& PreparedScenario::operator=(PreparedScenario&&) noexcept = default;
PreparedScenario::~PreparedScenario() = default;

namespace {

// A replica of `policy` running `base_model` on `gpu`; `group_engine`: its cluster group's
// engine keys.
PreparedReplica prepare_replica(const Scenario& s, const ConfigNode& policy,
                                const ModelSpec& base_model, const GpuSpec& gpu,
                                const std::optional<ConfigNode>& group_engine) {
  PreparedReplica r;
  PreparedReplica* p = &r;
  const ConfigNode engine_node = policy_engine(s.root, policy, group_engine);
  p->engine = parse_engine_config(engine_node);
  resolve_model_limits(p->engine, engine_node, base_model);  // before the pool's profile run
  const EngineConfig& engine = p->engine;
  const ConfigNode kv_node = engine_node.optional_child("kv").value_or(
      ConfigNode::parse_string("{type: paged}", "default kv"));
  // The engine's weights_dtype / kv_cache_dtype replace the catalog model's; the pool holds one
  // GPU's share of it (tensor_parallel x pipeline_parallel GPUs).
  ModelSpec model = base_model;
  if (engine.weights_dtype) model.weight_dtype = *engine.weights_dtype;
  if (engine.kv_cache_dtype) model.kv_dtype = *engine.kv_cache_dtype;
  const Parallelism parallelism{engine.tensor_parallel, engine.pipeline_parallel,
                                engine.data_parallel, engine.expert_parallel};
  try {
    check_parallelism(model, parallelism);
  } catch (const InputError& e) {
    // Point at the degree that does not fit (tensor_parallel when both are written).
    for (const char* key :
         {"tensor_parallel", "pipeline_parallel", "data_parallel", "expert_parallel"}) {
      if (auto n = engine_node.optional_child(key)) n->fail(e.what());
    }
    throw;
  }
  p->pool = std::make_unique<GpuMemoryPool>(
      model, gpu, kv_node,
      PoolOptions{.workspace_bytes = engine.workspace_bytes,
                  .attention = engine.attention,
                  .profile_batched_tokens = engine.max_num_batched_tokens,
                  .profile_num_seqs = engine.max_num_seqs,
                  .parallelism = parallelism});
  if (!parallelism.single() || engine.weights_dtype || engine.kv_cache_dtype) {
    const ModelSpec& share = p->pool->model();
    p->gpu_layout = GpuLayoutSummary{
        .gpus = parallelism.gpus(),
        .tensor_parallel = parallelism.tensor,
        .pipeline_parallel = parallelism.pipeline,
        .weights_dtype = std::string(dtype_name(model.weight_dtype)),
        .kv_cache_dtype = std::string(dtype_name(model.kv_dtype)),
        .weights_bytes_per_gpu = share.weights_bytes(),
        .kv_bytes_per_token_per_gpu = share.kv_bytes_per_token(),
        .kv_pool_tokens_per_gpu = p->pool->kv().usage().capacity_bytes / share.kv_bytes_per_token()};
  }
  engine_node.reject_unknown_keys();
  if (engine.attention_kernel && !engine.profile_path.empty()) {
    engine_node.child("attention_kernel")
        .fail("attention_kernel picks the built-in profile's flash efficiency; with engine.profile "
              "the profile file decides (write one with kvsim-validate profile --attention-kernel)");
  }
  Profile profile;
  if (engine.profile_path.empty()) {
    try {
      profile = default_profile(gpu, engine.attention_kernel);
    } catch (const InputError& e) {
      engine_node.child("attention_kernel").fail(e.what());
    }
  } else {
    profile = load_profile(engine.profile_path);
  }
  p->latency = std::make_unique<LatencyModel>(model, gpu, profile, engine.attention, parallelism);
  p->guards = make_guards(
      policy.optional_child("guards").value_or(ConfigNode::parse_string("[]", "none")), model,
      kv_node.get<std::string>("type"));
  return r;
}

// Every key a policy accepts (the unknown-key error lists them).
const std::vector<std::string> kPolicyKeys = {"name", "engine", "guards", "slo", "cluster", "model", "gpu"};

std::unique_ptr<PreparedPolicy> prepare_policy(const Scenario& s, const ConfigNode& policy) {
  auto p = std::make_unique<PreparedPolicy>();
  if (!policy.is_map()) policy.fail_expected("a policy like {name: paged, guards: []}");
  policy.allow(kPolicyKeys);
  policy.reject_unknown_keys_listing("a policy");
  p->name = policy.get<std::string>("name");
  // The policy's own model and GPU (a what-if beside the scenario's), else the scenario's; a
  // cluster group's own go on top of those.
  const Catalog& catalog = s.catalog ? *s.catalog : Catalog::builtin();
  ModelSpec model = s.model;
  GpuSpec gpu = s.gpu;
  if (auto m = policy.optional_child("model")) {
    model = load_model_node(*m, catalog);
    p->model = model.name;
  }
  if (auto g = policy.optional_child("gpu")) {
    gpu = resolve_gpu(*g, catalog);
    p->gpu = gpu.name;
  }
  const std::optional<ClusterConfig> cluster = cluster_config(s.root, policy);
  if (!cluster) {
    p->replicas.push_back(prepare_replica(s, policy, model, gpu, std::nullopt));
  } else {
    for (const ReplicaGroupConfig& g : cluster->groups) {
      const GpuSpec group_gpu = g.gpu ? resolve_gpu(*g.gpu, catalog) : gpu;
      const ModelSpec group_model = g.model ? load_model_node(*g.model, catalog) : model;
      for (int i = 0; i < g.count; ++i) {
        PreparedReplica r = prepare_replica(s, policy, group_model, group_gpu, g.engine);
        r.id = ReplicaIdentity{.label = fmt::format("{}-{}", g.name, i),
                               .group = g.name,
                               .gpu = group_gpu.name,
                               .role = g.role,
                               .index = i,
                               .gpus = r.engine.tensor_parallel * r.engine.pipeline_parallel,
                               .model = g.model ? group_model.name : ""};
        p->replicas.push_back(std::move(r));
      }
    }
    p->router = make_router(cluster->router, RouterContext{.seed = s.seed});
    p->router_type = cluster->router.get<std::string>("type", "round_robin");
    p->kv_transfer = {.gb_per_s = cluster->kv_transfer_gb_per_s,
                      .latency_us = cluster->kv_transfer_latency_us};
  }
  p->workload = make_workload(s.root.child("workload"), s.seed);
  p->slo = policy_slo(s.root, policy);
  return p;
}

// The engine a run uses: `--no-fast-forward` (RunOptions) turns fast-forward off over the
// scenario's `engine.fast_forward`.
EngineConfig engine_for_run(EngineConfig engine, const RunOptions& o) {
  engine.fast_forward = engine.fast_forward && o.fast_forward;
  return engine;
}

// Feeds `w`'s requests to `replica` (a Replica or a Cluster: arrive, set_on_finished, sample,
// finish) and runs the event queue dry.
template <class Target>
void drive(EventQueue& events, Target& replica, Workload& w, const RunOptions& o) {
  std::function<void()> pump = [&] {
    if (!w.source) return;
    if (auto next = w.source->next()) {
      const SimTime at = std::max(events.now(), next->arrival);
      events.schedule_at(at, [&, spec = std::move(*next)] {  // moved, not copied: one per request
        replica.arrive(spec);
        pump();
      });
    }
  };
  pump();
  if (w.clients) {
    ClosedLoopClients* clients = w.clients.get();
    for (int c = 0; c < clients->count(); ++c) {
      const RequestSpec spec = clients->first_request(c);
      events.schedule_at(spec.arrival, [&replica, spec] { replica.arrive(spec); });
    }
    replica.set_on_finished([&events, &replica, clients](const RequestState& r) {
      if (r.spec.client < 0) return;
      // A client whose request failed on arrival (429, server down) backs off before retrying;
      // without it, zero think time would retry forever at one instant.
      const SimTime resume = r.finished_at == r.spec.arrival ? events.now() + kClientRetryBackoff
                                                             : events.now();
      if (auto next = clients->next_after_completion(r.spec.client, resume)) {
        const RequestSpec spec = *next;
        events.schedule_at(std::max(events.now(), spec.arrival), [&replica, spec] { replica.arrive(spec); });
      }
    });
  }
  const SimTime period = std::max<SimTime>(1, seconds_to_sim(o.sample_interval_s));
  // Background events: the sampler never keeps the run going, so the end of the run (and every
  // summary figure) is the same whatever the sample interval. A lone replica's fast-forward may
  // take samples in line (a cluster's samples see every replica: they stay events).
  PeriodicEvent sampler(events, period, [&] { replica.sample(); });
  if constexpr (std::is_same_v<Target, Replica>) replica.set_sampler(&sampler);
  sampler.start();
  events.run();
  if constexpr (std::is_same_v<Target, Replica>) replica.set_sampler(nullptr);
  if (!events.stopped()) replica.finish();  // stopped (--max-wall-s): in-flight requests stay so
}

// Rows go to `requests_file` / `timeseries_file` as they are produced; with no output folder
// (both null) they are not produced.
// `observe(i, label)` gives replica i's timeline track (null: no timeline): a single replica is
// replica 0, a cluster's replicas are numbered in the order they are built and named by label.
PolicySummary run_policy(PreparedPolicy& p, int policy_index, const RunOptions& o, AtomicFile* requests_file,
                         AtomicFile* timeseries_file, std::optional<TraceCounters>& trace,
                         const std::function<ReplicaObserver*(int replica, const std::string& label)>& observe,
                         std::chrono::steady_clock::time_point started) {
  EventQueue events(EventQueue::Limits{.max_events = o.max_events,
                                       .max_time = seconds_to_sim(o.max_sim_time_s)});
  Recorder recorder(p.name);
  // The wall-clock hook: --max-wall-s and the progress line (never in outputs: they stay a pure
  // function of the scenario, bar the partial marks of a stopped run).
  const auto policy_started = std::chrono::steady_clock::now();
  auto next_progress = policy_started + std::chrono::seconds(1);
  if (o.max_wall_s > 0 || o.progress || o.interrupt_check) {
    events.set_poll([&] {
      if (o.interrupt_check) o.interrupt_check();
      const auto now = std::chrono::steady_clock::now();
      if (o.progress && now >= next_progress) {
        next_progress = now + std::chrono::seconds(1);
        const double wall = std::chrono::duration<double>(now - policy_started).count();
        fmt::print(stderr, "\r{}\x1b[K", progress_line(p.name, sim_to_seconds(events.now()),
                                                      recorder.outcomes_recorded(),
                                                      o.progress_total, wall));
        std::fflush(stderr);
      }
      return o.max_wall_s > 0 &&
             std::chrono::duration<double>(now - started).count() >= o.max_wall_s;
    });
  }
  recorder.stream_to(requests_file, timeseries_file);
  recorder.set_slo(p.slo);
  // The replicas' clocks (none without make_clock); they outlive the replicas' runs.
  std::vector<std::unique_ptr<IterationClock>> clocks;
  auto clock_for = [&](int replica, const std::string& label, const GpuMemoryPool& pool) -> IterationClock* {
    if (!o.make_clock) return nullptr;
    clocks.push_back(o.make_clock(ReplicaContext{.policy_index = policy_index,
                                                 .policy = p.name,
                                                 .replica = replica,
                                                 .label = label,
                                                 .pool = &pool}));
    return clocks.back().get();
  };
  PolicySummary summary;
  if (!p.router) {
    PreparedReplica& r = p.replicas.front();
    recorder.set_kv_pool_bytes(kv_pool_capacity_bytes(*r.pool));
    recorder.set_peak_flops(r.latency->gpu().fp16_flops);
    Replica replica(events, *r.pool, *r.latency, engine_for_run(r.engine, o), std::move(r.guards),
                    recorder);
    replica.set_check_invariants(o.check_invariants);
    if (observe) replica.set_observer(observe(0, ""));
    replica.set_clock(clock_for(0, "", *r.pool));
    drive(events, replica, p.workload, o);
    summary = recorder.finish(events.now(), events.stopped());
    summary.gpu_layout = r.gpu_layout;
    summary.gpus = r.engine.tensor_parallel * r.engine.pipeline_parallel;
  } else {
    // Each replica's recorder keeps its figures and timeseries rows; the cluster's (`recorder`)
    // gets every arrival and outcome: the totals and the requests.csv rows.
    std::vector<std::unique_ptr<Recorder>> recorders;
    Cluster cluster(events, std::move(p.router), recorder);
    std::vector<ReplicaIdentity> ids;
    for (PreparedReplica& r : p.replicas) {
      auto& rec = *recorders.emplace_back(std::make_unique<Recorder>(p.name));
      rec.stream_to(nullptr, timeseries_file);
      rec.report_to(&recorder, r.id.label);
      rec.set_kv_pool_bytes(kv_pool_capacity_bytes(*r.pool));
      rec.set_peak_flops(r.latency->gpu().fp16_flops);
      rec.set_slo(p.slo);
      Replica& member = cluster.add_replica(r.id.label, *r.pool, *r.latency, engine_for_run(r.engine, o),
                          std::move(r.guards), rec,
                          kv_pool_capacity_bytes(*r.pool),
                          r.id.role == "prefill"  ? ReplicaRole::kPrefill
                          : r.id.role == "decode" ? ReplicaRole::kDecode
                                                  : ReplicaRole::kMixed);
      if (observe) member.set_observer(observe(static_cast<int>(ids.size()), r.id.label));
      member.set_clock(clock_for(static_cast<int>(ids.size()), r.id.label, *r.pool));
      ids.push_back(r.id);
    }
    cluster.set_check_invariants(o.check_invariants);
    cluster.set_kv_transfer(p.kv_transfer);
    drive(events, cluster, p.workload, o);
    for (const auto& rec : recorders) recorder.merge_batches_of(*rec);
    summary = recorder.finish(events.now(), events.stopped());
    std::vector<PolicySummary> parts;
    for (size_t i = 0; i < recorders.size(); ++i) {
      parts.push_back(recorders[i]->finish(events.now(), events.stopped()));
      parts.back().gpu_layout = p.replicas[i].gpu_layout;
    }
    fold_replicas(summary, parts, ids, p.router_type);
    summary.cluster->kv_transfer = recorder.kv_transfer_stats();
    summary.cluster->kv_transfer_wait = recorder.kv_transfer_wait_stats();
  }
  if (o.check_invariants) check_occupancy(summary);
  summary.model = p.model;
  summary.gpu = p.gpu;
  if (p.workload.trace_counters && !trace) trace = *p.workload.trace_counters;
  if (o.progress) fmt::print(stderr, "\r\x1b[K");  // clears the progress line
  return summary;
}

std::string emit(const YAML::Node& tree) {
  YAML::Emitter emitter;
  emitter << tree;
  return emitter.c_str();
}

// scenario_hash has always started from 1469598103934665603, a digit short of FNV's standard
// offset basis. Kept, so every scenario_hash already written (manifests, sweep folders that
// resume by it, figure captions) stays valid.
constexpr uint64_t kScenarioHashBasis = 1469598103934665603ull;
std::string hash_text(const std::string& text) {
  return fmt::format("{:016x}", fnv1a64(text, kScenarioHashBasis));
}

}  // namespace

std::string scenario_hash(const YAML::Node& tree) { return hash_text(emit(tree)); }

PreparedScenario prepare_scenario(const Scenario& s, const RunOptions&) {
  PreparedScenario prepared;
  prepared.scenario_ = &s;
  const ConfigNode policies = s.root.child("policies");
  if (!policies.is_sequence() || policies.size() == 0) {
    policies.fail_expected("a non-empty list of policies");
  }
  std::map<std::string, ConfigNode> names;
  for (size_t i = 0; i < policies.size(); ++i) {
    check_unique_name(policies.at(i), names);
    prepared.policies_.push_back(prepare_policy(s, policies.at(i)));
  }
  s.root.child("workload");
  s.root.reject_unknown_keys();
  prepared.resolved_ = emit(s.root.yaml());
  prepared.hash_ = hash_text(prepared.resolved_);
  return prepared;
}

std::string progress_line(const std::string& policy, double sim_s, int64_t done,
                          std::optional<int64_t> total, double wall_s) {
  const double rate = wall_s > 0 ? static_cast<double>(done) / wall_s : 0;
  std::string line = fmt::format("kvsim: policy {}  t={:.1f} s simulated  {} requests done ({}/s)",
                                 policy, sim_s, cli::with_commas(done),
                                 cli::with_commas(std::llround(rate)));
  if (total && rate > 0) {
    const double eta = static_cast<double>(std::max<int64_t>(0, *total - done)) / rate;
    line += fmt::format("  ETA {:.0f} s", eta);
  }
  return line;
}

RunResult simulate(PreparedScenario& prepared, const RunOptions& o) {
  check_run_options(o, o.arg_front);
  const auto started = std::chrono::steady_clock::now();
  const Scenario& s = prepared.scenario();
  RunResult result;
  result.scenario_hash = prepared.hash();
  namespace fs = std::filesystem;
  const fs::path dir = o.out_dir;
  // The per-request and timeseries rows stream to temporary files as requests finish (policies
  // run one after another, so the bytes and row order are those of one buffer); they take their
  // final names below, with the other files, only when the whole run succeeded.
  std::unique_ptr<AtomicFile> requests_file, timeseries_file;
  if (!o.out_dir.empty()) {
    requests_file = std::make_unique<AtomicFile>(dir / "requests.csv");
    timeseries_file = std::make_unique<AtomicFile>(dir / "timeseries.csv");
    // A cluster's rows name their replica (only then: other scenarios keep their bytes).
    const bool cluster = s.root.has("cluster");
    requests_file->append(Recorder::request_header(cluster));
    timeseries_file->append(Recorder::timeseries_header(cluster));
  }
  std::unique_ptr<TimelineWriter> timeline;
  if (!o.timeline_path.empty()) {
    timeline = std::make_unique<TimelineWriter>(
        o.timeline_path, TimelineWindow{.start_s = o.timeline_start_s, .end_s = o.timeline_end_s});
  }
  for (size_t i = 0; i < prepared.policies_.size(); ++i) {
    auto& policy = prepared.policies_[i];
    KVSIM_CHECK(policy != nullptr, "simulate: a prepared scenario runs once");
    std::function<ReplicaObserver*(int, const std::string&)> observe;
    if (timeline) {
      observe = [&timeline, i, &name = policy->name](int replica, const std::string& label) {
        return timeline->track(static_cast<int>(i), name, replica, label);
      };
    } else if (o.observe) {
      observe = [&o, &name = policy->name](int, const std::string& label) {
        return o.observe(name, label);
      };
    }
    result.policies.push_back(
        run_policy(*policy, static_cast<int>(i), o, requests_file.get(), timeseries_file.get(), result.trace, observe, started));
    policy.reset();  // frees its pool before the next policy runs
  }
  if (timeline) timeline->commit();
  if (o.out_dir.empty()) return result;

  nlohmann::ordered_json manifest;
  manifest["kvsim_version"] = kvsim_version();
  manifest["scenario_name"] = s.name;
  manifest["scenario_source"] = s.root.source();
  manifest["scenario_hash"] = result.scenario_hash;
  manifest["seed"] = s.seed;
  manifest["model"] = s.model.name;
  manifest["gpu"] = s.gpu.name;
  manifest["resolved_scenario"] = prepared.resolved_text();
  manifest["files"] = {"summary.json", "summary.csv", "requests.csv", "timeseries.csv"};
  for (const auto& [name, file] : o.extra_files) manifest["files"].push_back(name);
  if (o.marks.is_object()) {
    for (const auto& [key, value] : o.marks.items()) manifest[key] = value;
  }
  // Policies on more than one GPU (a replica's TP x PP, summed over a cluster's replicas): only
  // then, so single-GPU manifests keep their bytes. Memory figures are per GPU when a replica
  // spans GPUs.
  nlohmann::ordered_json gpus;
  bool per_gpu = false;
  for (const PolicySummary& p : result.policies) {
    if (p.gpus > 1) gpus[p.name] = p.gpus;
    per_gpu = per_gpu || (p.gpu_layout && p.gpu_layout->gpus > 1);
  }
  if (per_gpu) manifest["memory_figures"] = "per GPU";
  if (!gpus.empty()) manifest["gpus_per_policy"] = gpus;
  requests_file->commit();
  timeseries_file->commit();
  for (const auto& [name, file] : o.extra_files) file->commit();
  write_file_atomic(dir / "summary.csv", summary_csv(result.policies));
  auto summary = summary_json(result.policies);
  summary["scenario_hash"] = result.scenario_hash;
  if (result.trace) {  // only here, so other workloads' summaries keep their bytes
    const TraceCounters& t = *result.trace;
    summary["trace"] = {{"rows_read", t.rows_read},
                        {"requests", t.requests},
                        {"skipped_bad_rows", t.skipped_bad_rows},
                        {"outside_window", t.outside_window},
                        {"clipped_prompt", t.clipped_prompt},
                        {"clipped_output", t.clipped_output}};
  }
  if (o.marks.is_object()) {
    for (const auto& [key, value] : o.marks.items()) summary[key] = value;
  }
  write_file_atomic(dir / "summary.json", summary.dump(2) + "\n");
  write_file_atomic(dir / "manifest.json", manifest.dump(2) + "\n");  // last: marks completion
  return result;
}

RunResult run_scenario(const Scenario& s, const RunOptions& o) {
  PreparedScenario prepared = prepare_scenario(s, o);
  return simulate(prepared, o);
}

}  // namespace kvsim
