#include "sim/run/scenario_runner.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <type_traits>

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/text_table.h"
#include "sim/cluster/cluster.h"
#include "sim/cluster/cluster_summary.h"
#include "sim/engine/event_queue.h"
#include "sim/engine/periodic_event.h"
#include "sim/run/prepared_policy.h"
#include "sim/run/run_outputs.h"
#include "sim/serving/replica.h"
#include "sim/timeline/timeline_writer.h"

namespace kvsim {

namespace {

// How long a closed-loop client waits after an instant failure before sending again.
constexpr SimTime kClientRetryBackoff = kNsPerSecond;

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
      const SimTime resume =
          r.finished_at == r.spec.arrival ? events.now() + kClientRetryBackoff : events.now();
      // Usually one request; a session's fan-out sends its sub-sessions' turns together.
      for (RequestSpec& spec : clients->after_completion(r.spec, resume)) {
        const SimTime at = std::max(events.now(), spec.arrival);
        events.schedule_at(at, [&replica, spec = std::move(spec)] { replica.arrive(spec); });
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

// The offloading columns of the scenario's result files: on when any replica of any policy has
// engine.kv_offloading (and a disk under it), so the files have one header for every policy.
OffloadColumns offload_columns(const std::vector<std::unique_ptr<PreparedPolicy>>& policies) {
  OffloadColumns c;
  for (const auto& p : policies) {
    for (const PreparedReplica& r : p->replicas) {
      c.tiers = c.tiers || r.engine.kv_offloading.has_value();
      c.disk = c.disk || (r.engine.kv_offloading && r.engine.kv_offloading->disk);
    }
  }
  return c;
}

// Rows go to `requests_file` / `timeseries_file` as they are produced, with `columns`; with no
// output folder (both null) they are not produced.
// `observe(i, label)` gives replica i's timeline track (null: no timeline): a single replica is
// replica 0, a cluster's replicas are numbered in the order they are built and named by label.
PolicySummary run_policy(
    PreparedPolicy& p, int policy_index, const RunOptions& o, AtomicFile* requests_file,
    AtomicFile* timeseries_file, OffloadColumns columns, std::optional<TraceCounters>& trace,
    const std::function<ReplicaObserver*(int replica, const std::string& label)>& observe,
    std::chrono::steady_clock::time_point started) {
  EventQueue events(
      EventQueue::Limits{.max_events = o.max_events, .max_time = seconds_to_sim(o.max_sim_time_s)});
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
        fmt::print(stderr, "\r{}\x1b[K",
                   progress_line(p.name, sim_to_seconds(events.now()), recorder.outcomes_recorded(),
                                 o.progress_total, wall));
        std::fflush(stderr);
      }
      return o.max_wall_s > 0 &&
             std::chrono::duration<double>(now - started).count() >= o.max_wall_s;
    });
  }
  recorder.stream_to(requests_file, timeseries_file, columns);
  recorder.set_slo(p.slo);
  recorder.report_tpot_metrics(p.replicas.front().engine.vllm_version.has_value());
  // The replicas' clocks (none without make_clock); they outlive the replicas' runs.
  std::vector<std::unique_ptr<IterationClock>> clocks;
  auto clock_for = [&](int replica, const std::string& label,
                       const GpuMemoryPool& pool) -> IterationClock* {
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
      rec.stream_to(nullptr, timeseries_file, columns);
      rec.report_to(&recorder, r.id.label);
      rec.set_kv_pool_bytes(kv_pool_capacity_bytes(*r.pool));
      rec.set_peak_flops(r.latency->gpu().fp16_flops);
      rec.set_slo(p.slo);
      Replica& member =
          cluster.add_replica(r.id.label, *r.pool, *r.latency, engine_for_run(r.engine, o),
                              std::move(r.guards), rec, kv_pool_capacity_bytes(*r.pool),
                              r.id.role == "prefill"  ? ReplicaRole::kPrefill
                              : r.id.role == "decode" ? ReplicaRole::kDecode
                                                      : ReplicaRole::kMixed);
      if (observe) member.set_observer(observe(static_cast<int>(ids.size()), r.id.label));
      member.set_clock(clock_for(static_cast<int>(ids.size()), r.id.label, *r.pool));
      ids.push_back(r.id);
    }
    for (const LockstepRanks& l : p.lockstep) cluster.add_lockstep_group(l.ranks, l.options);
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

}  // namespace

std::string progress_line(const std::string& policy, double sim_s, int64_t done,
                          std::optional<int64_t> total, double wall_s) {
  const double rate = wall_s > 0 ? static_cast<double>(done) / wall_s : 0;
  std::string line =
      fmt::format("kvsim: policy {}  t={:.1f} s simulated  {} requests done ({}/s)", policy, sim_s,
                  cli::with_commas(done), cli::with_commas(std::llround(rate)));
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
  const OffloadColumns columns = offload_columns(prepared.policies_);
  if (!o.out_dir.empty()) {
    remove_stale_temporaries_in(dir);
    requests_file = std::make_unique<AtomicFile>(dir / "requests.csv");
    timeseries_file = std::make_unique<AtomicFile>(dir / "timeseries.csv");
    // A cluster's rows name their replica (only then: other scenarios keep their bytes).
    const bool cluster = s.root.has("cluster");
    requests_file->append(Recorder::request_header(cluster, columns));
    timeseries_file->append(Recorder::timeseries_header(cluster, columns));
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
    result.policies.push_back(run_policy(*policy, static_cast<int>(i), o, requests_file.get(),
                                         timeseries_file.get(), columns, result.trace, observe,
                                         started));
    policy.reset();  // frees its pool before the next policy runs
  }
  if (timeline) timeline->commit();
  if (o.out_dir.empty()) return result;

  write_run_outputs(prepared, result, o, *requests_file, *timeseries_file);
  return result;
}

RunResult run_scenario(const Scenario& s, const RunOptions& o) {
  PreparedScenario prepared = prepare_scenario(s, o);
  return simulate(prepared, o);
}

}  // namespace kvsim
