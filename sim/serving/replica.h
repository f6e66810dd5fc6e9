// One GPU replica serving requests: its lifecycle (arrival, one forward pass per event, the end
// of the run), OOM handling (crash and restart, or abort the request) and outcomes. The jobs it
// delegates, each to its own part:
//   AdmissionQueue  guards at admission, their queue and its timeouts
//   Scheduler       what each iteration runs (continuous or static batching), from BatchLimits
//   RunQueues       waiting/running/swapped requests, the plan steps, preemption and swap
//   KvLedger        every growth, settlement and release of a request's KV, with the deferred
//                   decode growth protocol (first allocations are RunQueues' own)
//   FastForward     the decode-only periods in closed form (sim/serving/fast_forward/), in
//                   fast-forward mode: entered at one seam, update_fast_forward; it reaches
//                   the replica only through FastForward::Host, which the replica implements
// One forward pass is one event; its duration comes from the latency model, or from an
// IterationClock when one is set (`kvsim-validate replay`: the iteration executed for real).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "models/latency/latency_model.h"
#include "models/memory/gpu_memory_pool.h"
#include "models/memory/kv_events.h"
#include "sim/engine/event_queue.h"
#include "sim/engine/periodic_event.h"
#include "sim/guards/guard.h"
#include "sim/metrics/observer.h"
#include "sim/metrics/recorder.h"
#include "sim/request/request_state.h"
#include "sim/serving/admission_queue.h"
#include "sim/serving/engine_config.h"
#include "sim/serving/fast_forward/fast_forward.h"
#include "sim/serving/iteration_clock.h"
#include "sim/serving/kv_ledger.h"
#include "sim/serving/run_queues.h"
#include "sim/serving/scheduler.h"
#include "sim/serving/speculative.h"
#include "sim/serving/step_gate.h"

namespace kvsim {

class OffloadConnector;  // sim/serving/offload/offload_connector.h

class Replica final : private FastForward::Host {
 public:
  // Collaborators are borrowed; they must outlive the replica. The scheduler is the one
  // config.scheduler names in scheduler_registry().
  Replica(EventQueue& events, GpuMemoryPool& pool, const LatencyModel& latency, EngineConfig config,
          std::vector<std::unique_ptr<Guard>> guards, Recorder& recorder);
  // The same with a given scheduler (tests wrap the registered ones).
  Replica(EventQueue& events, GpuMemoryPool& pool, const LatencyModel& latency, EngineConfig config,
          std::vector<std::unique_ptr<Guard>> guards, Recorder& recorder,
          std::unique_ptr<Scheduler> scheduler);
  ~Replica();

  // A request arrives now (events.now()).
  void arrive(const RequestSpec& spec);
  // Disaggregated serving (docs/cluster.md), the prefill side. arrive_prefill_only: run `spec`
  // for its first token only; its outcome (completed at the first token) goes to this replica's
  // figures, not the cluster's, and reaches on_finished while the request keeps its KV here
  // (kHandingOff) until release_handed_off(): its transfer ended, or will not happen.
  void arrive_prefill_only(const RequestSpec& spec);
  void release_handed_off(int64_t id);
  // The decode side. arrive_transferred: the prefill side's state `from` (first token made,
  // prompt KV computed) waits here until its KV fits; then it is allocated (hooks.pulled: the
  // transfer may start) and receive_transferred() (the transfer ended) starts its decoding. The
  // time stamps of its prefill are kept, so TTFT and E2E are the request's.
  // cancel_transferred: its prefill replica lost the KV (a crash): it ends lost_oom here.
  void arrive_transferred(const RequestState& from);
  void receive_transferred(int64_t id);
  void cancel_transferred(int64_t id);
  struct TransferHooks {
    std::function<void(int64_t id)> pulled;     // decode side: KV allocated, transfer may start
    std::function<void(int64_t id)> abandoned;  // decode side: fits not even alone: recomputes here
    std::function<void(int64_t id)> dropped;    // prefill side: a handed-off request's KV was lost
  };
  void set_transfer_hooks(TransferHooks hooks) { transfer_hooks_ = std::move(hooks); }
  // The KV events of its tiers (models/memory/kv_events.h): the GPU prefix cache's and the
  // offload tier's blocks, as they become findable or stop being findable (a cluster's
  // precise_prefix router listens). Before any arrival.
  void set_kv_event_sink(const KvEventSink& sink);
  // Called with every request that reaches its outcome (closed-loop clients hook in here).
  void set_on_finished(std::function<void(const RequestState&)> fn) {
    on_finished_ = std::move(fn);
  }
  // Checking mode: pool and bookkeeping invariants after every iteration and admission.
  void set_check_invariants(bool on) {
    check_ = on;
    update_fast_forward();
  }
  // Watcher of iterations and events (the timeline), or of requests (--trace-request: it keeps
  // the fast-forward on, ReplicaObserver::needs_every_iteration); borrowed, nullptr for none.
  void set_observer(ReplicaObserver* observer) {
    observer_ = observer;
    update_fast_forward();
  }
  // Where each iteration's duration comes from: borrowed, nullptr for the latency model (the
  // default). A clock is asked once per iteration, so the replica no longer fast-forwards; it is
  // told when a request's KV is dropped (release) and when a crash drops all of it (release_all).
  void set_clock(IterationClock* clock) {
    clock_ = clock;
    ledger_.set_clock(clock);  // every KV release goes through the ledger
    if (clock_ != nullptr) fast_forward_ok_ = false;
    update_fast_forward();
  }

  // Lockstep data parallelism (sim/cluster/lockstep_group.h): with a gate (borrowed, set before
  // any request) the replica never starts an iteration itself; it wakes the gate, which calls
  // prepare_gated_step() on every rank, then launch_gated_step() with the group's duration. Like a
  // clock, a gate turns the fast-forward off (every step must be asked for).
  void set_step_gate(StepGate* gate) {
    gate_ = gate;
    if (gate_ != nullptr) fast_forward_ok_ = false;
    update_fast_forward();
  }
  // Plans the next iteration now, as an ungated replica would start it (admission, plan,
  // activations); false when nothing runs. Then gated_duration() is its own duration,
  // gated_tokens() the tokens it computes (the count DP ranks pad to).
  bool prepare_gated_step() { return prepare_iteration(); }
  SimTime gated_duration() const { return prepared_duration_; }
  int64_t gated_tokens() const;
  // In a lockstep group: the prepared iteration's time padded to `to_tokens` tokens (CUDA
  // graphs under DP: every rank pads to the largest rank's count) with `group_tokens` tokens,
  // all ranks' together, through the expert layers; and the time of a dummy forward of one
  // token padded likewise (a rank with nothing scheduled). The latency model's, as a change to
  // the prepared duration: a padding token is a decode sequence of context 1 (it runs the
  // linear and expert layers; attention for it does next to nothing). With a declared
  // step_time: per_token for each padding token, and duration(tokens, 1 sequence) for the dummy.
  SimTime lockstep_time(int64_t to_tokens, int64_t group_tokens) const;
  SimTime dummy_time(int64_t to_tokens, int64_t group_tokens) const;
  // Starts the prepared iteration, lasting `duration` (the group's step).
  void launch_gated_step(SimTime duration) { launch_iteration(duration); }
  // vLLM's published request counts (the DP load balancer's inputs): the scheduler's waiting
  // queue (guard-queued requests included: the engine has them) and its running list.
  int64_t waiting() const { return admission_.size() + queues_.waiting_size(); }
  int64_t running() const { return queues_.running_size(); }

  // Sampler hook: a timeseries row now.
  void sample();
  // The run's timeseries sampler, when this replica alone is sampled (not a cluster's): its
  // fast-forward then takes the samples that fall inside a quiet run in line instead of ending the
  // run there (FastForward::quiet). Null: none (the default).
  void set_sampler(PeriodicEvent* sampler) { sampler_ = sampler; }
  // Ends the run: whatever is still in flight when the clock stops is not counted twice; callers
  // run the event queue dry first, so this only checks that nothing is left.
  void finish();

  // Request `id`'s true figures now (generated, prefill, KV held: a RequestEvent's, its kind
  // unused), the same with the fast-forward on and off; nullopt when it is not in flight here.
  std::optional<RequestEvent> request_view(int64_t id) const;

  int64_t inflight() const { return queues_.size(); }
  bool idle() const { return requests_.empty(); }
  // Restarting after an OOM crash: arrivals fail at once (a cluster's router routes around it).
  bool down() const { return down_; }
  GpuMemoryPool& pool() const { return pool_; }
  const BatchLimits& limits() const { return limits_; }

 private:
  // Asks for an iteration: one starts, if none is running and there is work, after every event
  // due now (a late event), so the plan made at t sees every arrival and completion at t.
  void kick();
  void start_iteration();
  // start_iteration's halves: plan and time the iteration (false: none), then start it lasting
  // `duration` (its own, or a lockstep group's).
  bool prepare_iteration();
  void launch_iteration(SimTime duration);
  // Plans into planning_, breaking waits in which requests hold memory but none can run. False
  // when nothing is to run (idle, or an OOM ended the plan). With `nothing`, a plan that takes
  // nothing returns false at once, setting *nothing, without breaking a wait.
  bool plan(bool* nothing = nullptr);
  // Async scheduling's plan (engine.async_scheduling; replica_async.cc).
  bool plan_ahead();
  // A request the guards admitted: into the waiting queue, or held there until the plan that
  // may see it (async scheduling).
  void admitted(RequestState& r);
  // Async scheduling: the requests whose last token came with the step that just ended stay
  // running, holding their blocks, until the next plan is made; then they finish.
  void hold_finishing(int64_t id);
  void release_finishing();
  // Ends in_flight_, the iteration the event queue is running.
  void end_iteration();
  // The step functions an iteration's start and end are made of, called by stepping
  // (start_iteration, end_iteration) and by the fast-forward's steps alike, so that both make the
  // same calls in the same order. record_start: the state at its start `t` (activations
  // reserved) and its batch (`seqs` sequences, `tokens` tokens, lasting `duration`). hand_over:
  // `plan` becomes the iteration in flight, started now, ending after `duration`.
  // close_iteration: its end is counted (`closed_form`: a fast-forward step) and its activations
  // released. complete: the requests whose last token it made finish (async scheduling: after
  // the next plan).
  // (Defined here, hand_over forced inline: they run every iteration, and as out-of-line calls
  // they cost about 1% more instructions on kvsim_bench_sim, measured with callgrind.)
  void record_start(SimTime t, const MemorySnapshot& start, int64_t seqs, int64_t tokens,
                    SimTime duration, Int128 flops) {
    recorder_.on_state(t, start);
    recorder_.on_batch(seqs, tokens, duration, flops);
  }
  [[gnu::always_inline]] void hand_over(IterationPlan& plan, SimTime duration) {
    busy_ = true;
    iteration_start_ = events_.now();
    swap(in_flight_, plan);  // IterationPlan's own: no temporary
    events_.schedule(duration, [this] { end_iteration(); });
  }
  void close_iteration(bool closed_form) {
    if (closed_form) {
      recorder_.on_fast_forward_iteration();
    } else {
      recorder_.on_iteration();
    }
    pool_.release_activations();
  }
  void complete(const std::vector<int64_t>& done) {
    for (const int64_t id : done) {
      if (v0_output_) {
        v0_hold_finished(id);  // they end when the next step processes this one's outputs
      } else if (async_) {
        hold_finishing(id);  // they finish after the next plan
      } else {
        finish_request(
            id, requests_.at(id).truncated ? Outcome::kCompletedTruncated : Outcome::kCompleted);
      }
    }
  }
  // FastForward::Host: what a stretch reaches, the step functions above among it.
  Parts stretch_parts() override { return {pool_, events_, queues_, ledger_, recorder_}; }
  bool stretch_may_start() const override {
    return !busy_ && !down_ && !kick_pending_ && admission_.size() == 0 && finishing_.empty();
  }
  bool plans_admit_nothing(const QueueView& view, int64_t decoding,
                           int64_t walk_frees) const override {
    return scheduler_->admits_nothing(view, limits_, decoding, walk_frees);
  }
  bool guarded() const override { return admission_.has_guards(); }
  bool plans_ahead() const override { return async_; }
  PeriodicEvent* stretch_sampler() const override { return sampler_; }
  DecodeStepFixed stretch_step(int64_t seqs, int block_tokens) const override {
    return decode_step_fixed(seqs, block_tokens);
  }
  void stretch_record_start(SimTime t, const MemorySnapshot& start, int64_t seqs, int64_t tokens,
                            SimTime duration, Int128 flops) override {
    record_start(t, start, seqs, tokens, duration, flops);
  }
  void stretch_hand_over(IterationPlan& plan, SimTime duration) override {
    hand_over(plan, duration);
  }
  void stretch_step_started(SimTime t) override { iteration_start_ = t; }
  void stretch_close_iteration() override { close_iteration(true); }
  void stretch_complete(const std::vector<int64_t>& done) override { complete(done); }
  void stretch_sample_at(SimTime t, const MemorySnapshot& s) override { sample_at(t, s); }
  // The V0 host path (engine.host_path kV0AsyncOutput; replica_v0_output.cc): a step's tokens
  // are stamped when the next step's output processing has run. v0_token_made: `r`'s first
  // token came with the step that just ended. v0_hold_finished: `id` made its last token there.
  // v0_outputs_processed: the next step starts now (`host_s` of host work before its forward);
  // stamps the held outputs and returns the step's duration, at least that work plus the
  // processing. v0_drain: nothing is scheduled next: the outputs are processed at once.
  // v0_release_processed: the step in which they were processed has ended: the finished ones end.
  void v0_token_made(RequestState& r);
  void v0_hold_finished(int64_t id);
  SimTime v0_outputs_processed(SimTime duration);
  void v0_drain();
  void v0_release_processed();
  // A timeseries row at `t` of state `s` (sample()'s, and a quiet run's samples in line).
  void sample_at(SimTime t, const MemorySnapshot& s);
  // The seam: in fast-forward mode (fast_forward_ok_) a FastForward (sim/serving/fast_forward/),
  // unless checking mode, an observer of every iteration or a clock reads every request at every
  // step. Set before any request.
  void update_fast_forward();
  void run_admission();  // the guard queue moves, unless the replica is down

  void oom(int64_t culprit, const AllocResult& why);
  void restart_done();

  // `at`: the time its end is stamped (the V0 host path's output processing); -1: now.
  void finish_request(int64_t id, Outcome outcome, SimTime at = -1);
  // A prefill-only request's first token is out: its outcome is recorded, its KV stays.
  void hand_off(RequestState& r, Outcome outcome);
  // The clock's duration of the planned iteration `it` (clock_ set): its sequences as ClockSeqs.
  double clock_seconds(const IterationPlan& it, const BatchShape& shape, const IterationCost& cost);
  // The latency model's decode-only step of n sequences, or the engine's declared step time
  // (engine.step_time) with the model's FLOPs: stepping and the fast-forward both time
  // decode-only steps by it.
  DecodeStepFixed decode_step_fixed(int64_t n, int block_tokens) const;
  void check() const;
  // The observer's view now (called only when there is one).
  ReplicaState observed_state() const;
  void notify(ReplicaEvent kind, int64_t request_id, Outcome outcome = Outcome::kNone) {
    if (observer_) observer_->on_event(kind, request_id, outcome, observed_state());
  }
  // A request's event for the observer, with its true figures (replica_observe.cc); nothing
  // without one. `chunk`: a prefill chunk's tokens.
  void observe(RequestEventKind kind, const RequestState& r, std::string_view detail = {},
               int64_t chunk = 0) {
    if (observer_) observe_request(kind, r, detail, chunk);
  }
  void observe_request(RequestEventKind kind, const RequestState& r, std::string_view detail,
                       int64_t chunk);
  RequestEvent request_event(RequestEventKind kind, const RequestState& r, std::string_view detail,
                             int64_t chunk) const;
  // A guard's decision other than admit (the queue action only when it first queues `r`).
  void observe_guard(const RequestState& r, std::string_view guard, const Decision& d);

  EventQueue& events_;
  GpuMemoryPool& pool_;
  const LatencyModel& latency_;
  EngineConfig config_;
  BatchLimits limits_;
  std::unique_ptr<Scheduler> scheduler_;
  Recorder& recorder_;
  std::function<void(const RequestState&)> on_finished_;
  TransferHooks transfer_hooks_;
  bool check_ = false;
  ReplicaObserver* observer_ = nullptr;
  IterationClock* clock_ = nullptr;
  StepGate* gate_ = nullptr;
  SimTime prepared_duration_ = 0;  // prepare_iteration's duration and FLOPs
  Int128 prepared_flops_ = 0;
  ClockBatch clock_batch_;       // reused: its vectors keep their capacity
  SimTime iteration_start_ = 0;  // when in_flight_ started

  // In flight, by id. Walks over it sort the ids first, so outcomes keep a fixed order. Its
  // elements never move (node-based), so the queues and the iterations hold their addresses and
  // the per-iteration work does no lookup.
  std::unordered_map<int64_t, RequestState> requests_;
  KvLedger ledger_;
  RunQueues queues_;
  AdmissionQueue admission_;
  // The iteration being planned and the one in flight (at most one: busy_); reused, so their
  // vectors keep their capacity.
  IterationPlan planning_;
  IterationPlan in_flight_;
  std::vector<BatchChunk> chunk_scratch_;
  BatchShape shape_scratch_;  // start_iteration's, reused: its vectors keep their capacity
  // KV offloading (config_.kv_offloading; replica_offload.cc), else nullptr: the connector, set
  // up with its hooks into the queues (the fast-forward goes off: loads and stores end at their
  // own events); a request's load ended (it waits again, or it ended).
  std::unique_ptr<OffloadConnector> offload_;
  void set_up_offload();
  void offload_loaded(int64_t id);
  // The launched step's prefill chunks are planned as stores (build_connector_meta).
  void plan_offload_stores(const IterationPlan& it);
  void set_up_speculative();          // config_.speculative: spec_ and its decode gain
  std::unique_ptr<Speculator> spec_;  // speculative decoding (config_.speculative); else nullptr
  // Fast-forward: allowed by the config, the scheduler and the store (paged with deferred
  // growth); on (fast_forward_) unless something reads every request at every step.
  bool fast_forward_ok_ = false;
  std::unique_ptr<FastForward> fast_forward_;
  PeriodicEvent* sampler_ = nullptr;
  std::vector<int64_t> done_scratch_;         // end_iteration's completions
  std::vector<int64_t> decode_done_scratch_;  // the decodes' share of them
  // Async scheduling (engine.async_scheduling with a scheduler that plans_ahead()): the next plan
  // is the one made when the iteration that just ended started (plan_after_end_: its start is
  // the arrivals' cutoff); the requests finished by it (finishing_) wait for that plan.
  bool async_ = false;
  bool plan_after_end_ = false;
  std::vector<int64_t> finishing_;
  // The V0 host path: on (v0_output_); the first tokens and the finished requests of the step
  // that ended last, waiting for their output processing (v0_first_, v0_finished_), that step's
  // sequences (v0_seqs_), and the time their processing was stamped (v0_processed_at_; -1: not
  // yet), the finished ones ending with the step in which it ran.
  bool v0_output_ = false;
  std::vector<int64_t> v0_first_;
  std::vector<int64_t> v0_finished_;
  int64_t v0_seqs_ = 0;
  SimTime v0_processed_at_ = -1;
  bool busy_ = false;
  bool down_ = false;
  bool kick_pending_ = false;  // a late kick is scheduled
};

}  // namespace kvsim
