#include "sim/serving/replica.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "core/check.h"
#include "models/memory/kv_capabilities.h"
#include "sim/serving/fast_forward/fast_forward.h"
#include "sim/serving/offload/offload_connector.h"

namespace kvsim {

namespace {

std::shared_ptr<spdlog::logger> engine_log() {
  auto l = spdlog::get("engine");
  return l ? l : spdlog::default_logger();
}

std::unique_ptr<Scheduler> registered_scheduler(const std::string& name) {
  const auto* entry = scheduler_registry().find(name);
  KVSIM_CHECK(entry != nullptr, "no scheduler named '{}'", name);
  return entry->make();
}

}  // namespace

Replica::Replica(EventQueue& events, GpuMemoryPool& pool, const LatencyModel& latency,
                 EngineConfig config, std::vector<std::unique_ptr<Guard>> guards,
                 Recorder& recorder)
    : Replica(events, pool, latency, config, std::move(guards), recorder,
              registered_scheduler(config.scheduler)) {}

Replica::Replica(EventQueue& events, GpuMemoryPool& pool, const LatencyModel& latency,
                 EngineConfig config, std::vector<std::unique_ptr<Guard>> guards,
                 Recorder& recorder, std::unique_ptr<Scheduler> scheduler)
    : events_(events),
      pool_(pool),
      latency_(latency),
      config_(std::move(config)),
      limits_{.max_num_seqs = config_.max_num_seqs,
              .max_num_batched_tokens = config_.max_num_batched_tokens,
              .chunked_prefill = config_.chunked_prefill,
              .batch_size = config_.batch_size,
              .reserve_full_sequence = config_.scheduler_reserve_full_isl,
              .long_prefill_token_threshold = config_.long_prefill_token_threshold},
      scheduler_(std::move(scheduler)),
      recorder_(recorder),
      ledger_(pool),
      queues_(requests_, pool, ledger_, recorder, config_,
              {.oom = [this](int64_t id, const AllocResult& why) { oom(id, why); },
               .finish = [this](int64_t id, Outcome o) { finish_request(id, o); },
               .check_allocation =
                   [this](const RequestState& r, int64_t tokens) {
                     return admission_.check_allocation(r, tokens);
                   },
               .scheduled =
                   [this](RequestState& r) {
                     admission_.on_scheduled(r);
                     observe(RequestEventKind::kScheduled, r);
                   },
               .preempted =
                   [this](const RequestState& r) { notify(ReplicaEvent::kPreempted, r.spec.id); },
               .now = [this] { return events_.now(); },
               .pulled =
                   [this](const RequestState& r) {
                     recorder_.on_state(events_.now(), pool_.snapshot());  // its KV is held now
                     if (transfer_hooks_.pulled) transfer_hooks_.pulled(r.spec.id);
                   },
               .abandoned =
                   [this](const RequestState& r) {
                     if (transfer_hooks_.abandoned) transfer_hooks_.abandoned(r.spec.id);
                   },
               .observe = [this](const RequestState& r, RequestEventKind k) { observe(k, r); }}),
      admission_(events, pool, std::move(guards), requests_,
                 {.admitted = [this](RequestState& r) { admitted(r); },
                  .finish = [this](int64_t id, Outcome o) { finish_request(id, o); },
                  .timed_out =
                      [this] {
                        run_admission();
                        kick();
                      },
                  .inflight = [this] { return inflight(); },
                  .observe = [this](const RequestState& r, RequestEventKind k) { observe(k, r); },
                  .guard_decided = [this](const RequestState& r, std::string_view guard,
                                          const Decision& d) { observe_guard(r, guard, d); }}) {
  KVSIM_CHECK(scheduler_ != nullptr, "a replica needs a scheduler");
  async_ = config_.async_scheduling && scheduler_->plans_ahead();
  queues_.set_async(async_);
  v0_output_ = config_.host_path == HostPath::kV0AsyncOutput;
  fast_forward_ok_ =
      fast_forward_eligible(config_, *scheduler_, pool_.kv(), queues_.walk_may_end_early());
  if (config_.kv_offloading) set_up_offload();
  if (config_.speculative) set_up_speculative();
  update_fast_forward();
  recorder_.on_state(events_.now(), pool_.snapshot());  // weights and workspace from the start
}

Replica::~Replica() = default;

void Replica::set_up_speculative() {
  spec_ = std::make_unique<Speculator>(*config_.speculative, latency_);
  queues_.set_decode_gain([this](RequestState& r) { return spec_->tokens_gained(r, recorder_); });
  recorder_.on_speculative(config_.speculative->method_name,
                           config_.speculative->num_speculative_tokens);
}

void Replica::update_fast_forward() {
  const bool on =
      fast_forward_ok_ && !check_ && (observer_ == nullptr || !observer_->needs_every_iteration());
  if (on == (fast_forward_ != nullptr)) return;
  fast_forward_.reset();
  if (on) {
    // The queues' decoding set: the aggregate.
    fast_forward_ = std::make_unique<FastForward>(static_cast<FastForward::Host&>(*this));
  } else {
    queues_.set_decodes(nullptr);  // stepping's
  }
}

void Replica::arrive(const RequestSpec& spec) {
  recorder_.on_arrival(events_.now());
  RequestState& r = requests_[spec.id];
  r.spec = spec;
  r.prompt_tokens = spec.prompt_tokens;
  observe(RequestEventKind::kArrived, r);
  if (down_) {
    finish_request(spec.id, Outcome::kFailedUnavailable);
    return;
  }
  // The server refuses at once what asks for more than max_model_len tokens in all (vLLM's
  // OpenAI server answers HTTP 400), before any guard sees it.
  if (config_.max_model_len > 0 &&
      spec.prompt_tokens + spec.output_tokens > config_.max_model_len) {
    finish_request(spec.id, Outcome::kRejectedTooLong);
    return;
  }
  // The request's own deadline, else the engine's; it runs from the arrival.
  const std::optional<SimTime> wait =
      spec.max_queue_time ? spec.max_queue_time : config_.max_queue_time;
  if (wait) r.deadline_at = events_.now() + *wait;
  if (admission_.arrive(r)) kick();
}

void Replica::arrive_prefill_only(const RequestSpec& spec) {
  RequestSpec first = spec;
  first.output_tokens = 1;
  requests_[spec.id].prefill_only = true;
  arrive(first);
}

void Replica::arrive_transferred(const RequestState& from) {
  recorder_.on_arrival(events_.now(), false);
  RequestState& r = requests_[from.spec.id];
  r.spec = from.spec;
  r.prompt_tokens = from.prompt_tokens;
  r.truncated = from.truncated;
  r.tokens_dropped = from.tokens_dropped;
  r.generated = from.generated;
  r.queued_at = from.queued_at;
  r.admitted_at = from.admitted_at;
  r.first_scheduled_at = from.first_scheduled_at;
  r.first_token_at = from.first_token_at;
  r.preempted_before_first_token = from.preempted_before_first_token;
  r.scheduled = true;
  r.kv_transferred = true;
  observe(RequestEventKind::kArrived, r, "transferred");
  if (down_) {
    finish_request(r.spec.id, Outcome::kFailedUnavailable);
    return;
  }
  if (r.generated >= r.spec.output_tokens) {  // a one-token answer: nothing left to decode
    finish_request(r.spec.id, r.truncated ? Outcome::kCompletedTruncated : Outcome::kCompleted);
    return;
  }
  queues_.admit_transferred(r);
  kick();
}

void Replica::receive_transferred(int64_t id) {
  queues_.receive(requests_.at(id));
  kick();
}

void Replica::cancel_transferred(int64_t id) {
  finish_request(id, Outcome::kLostOom);
  recorder_.on_state(events_.now(), pool_.snapshot());
  kick();
}

void Replica::release_handed_off(int64_t id) {
  auto f = requests_.find(id);
  KVSIM_CHECK(f != requests_.end() && f->second.phase == Phase::kHandingOff,
              "request {} released while not handed off", id);
  ledger_.release_if_held(f->second);  // its KV left with the transfer
  queues_.remove(f->second);
  requests_.erase(f);
  recorder_.on_state(events_.now(), pool_.snapshot());
  kick();  // admissions may fit now
}

void Replica::hand_off(RequestState& r, Outcome outcome) {
  admission_.on_finish(r);
  queues_.hand_off(r);
  r.outcome = outcome;
  r.finished_at = events_.now();
  recorder_.on_outcome(r);
  notify(ReplicaEvent::kFinished, r.spec.id, outcome);
  observe(RequestEventKind::kFinished, r);
  const RequestState copy = r;
  if (on_finished_) on_finished_(copy);
}

void Replica::run_admission() {
  if (!down_) admission_.run();
}

void Replica::kick() {
  if (busy_ || down_ || kick_pending_) return;
  if (gate_ != nullptr) {  // the group starts this rank's steps
    gate_->wake();
    return;
  }
  kick_pending_ = true;
  events_.schedule_late(0, [this] {
    kick_pending_ = false;
    if (!busy_ && !down_) start_iteration();
  });
}

void Replica::oom(int64_t culprit, const AllocResult& why) {
  recorder_.on_oom();
  pool_.release_activations();
  engine_log()->info("t={:.6f}s OOM on req={}: {}", sim_to_seconds(events_.now()), culprit,
                     why.message());
  if (config_.on_oom == EngineConfig::OnOom::kAbortRequest) {
    notify(ReplicaEvent::kOomAbort, culprit);
    if (requests_.count(culprit)) finish_request(culprit, Outcome::kLostOom);
    recorder_.on_state(events_.now(), pool_.snapshot());
    events_.schedule(0, [this] { kick(); });
    return;
  }
  // Crash: the process dies with everything it held; the server is down for restart_s.
  std::vector<int64_t> lost;
  for (const auto& [id, r] : requests_) lost.push_back(id);
  std::sort(lost.begin(), lost.end());
  for (int64_t id : lost) finish_request(id, Outcome::kLostOom);
  finishing_.clear();
  v0_first_.clear();
  v0_finished_.clear();
  v0_processed_at_ = -1;
  plan_after_end_ = false;
  admission_.on_restart();
  pool_.restart();
  if (clock_ != nullptr) clock_->release_all();
  down_ = true;
  busy_ = false;
  recorder_.on_restart();
  recorder_.on_state(events_.now(), pool_.snapshot());
  notify(ReplicaEvent::kOomCrash, culprit);  // the state after it: nothing held, nothing queued
  events_.schedule(config_.restart, [this] { restart_done(); });
}

void Replica::restart_done() {
  down_ = false;
  recorder_.on_state(events_.now(), pool_.snapshot());
  notify(ReplicaEvent::kRestarted, -1);
  if (check_) check();
  kick();
}

void Replica::finish_request(int64_t id, Outcome outcome, SimTime at) {
  auto f = requests_.find(id);
  KVSIM_CHECK(f != requests_.end(), "finishing unknown request {}", id);
  RequestState& r = f->second;
  queues_.leave_decodes(r);             // its figures written out before anything reads them
  if (r.phase == Phase::kHandingOff) {  // a crash: its outcome is recorded, its KV is lost
    ledger_.release_if_held(r);
    queues_.remove(r);
    requests_.erase(f);
    if (transfer_hooks_.dropped) transfer_hooks_.dropped(id);
    return;
  }
  KVSIM_CHECK(r.outcome == Outcome::kNone, "request {} ends twice ({} then {})", id,
              outcome_name(r.outcome), outcome_name(outcome));
  // The iteration in flight holds running requests by address until it ends.
  KVSIM_CHECK(!busy_ || r.phase != Phase::kRunning,
              "request {} finishes while its iteration is in flight", id);
  const bool served = outcome == Outcome::kCompleted || outcome == Outcome::kCompletedTruncated;
  if (r.prefill_only && served && r.phase == Phase::kRunning) {
    hand_off(r, outcome);  // its KV stays until its transfer ends
    return;
  }
  ledger_.release_if_held(r);
  if (offload_) offload_->request_finished(id);
  admission_.on_finish(r);
  queues_.remove(r);
  r.phase = Phase::kDone;
  r.outcome = outcome;
  r.finished_at = at >= 0 ? at : events_.now();
  recorder_.on_outcome(r);
  notify(ReplicaEvent::kFinished, id, outcome);
  observe(RequestEventKind::kFinished, r);
  if (!on_finished_) {
    requests_.erase(f);
    return;
  }
  // The callback may start new requests here: it gets the finished one out of the map first.
  const RequestState done = std::move(r);
  requests_.erase(f);
  on_finished_(done);
}

void Replica::sample() {
  if (check_ && offload_) offload_->check();  // every sample: stored - evicted = occupancy
  sample_at(events_.now(), pool_.snapshot());
}

void Replica::sample_at(SimTime t, const MemorySnapshot& s) {
  // The tiers as they are at the sample (the fast-forward, whose samples come late, is off with
  // kv_offloading).
  const std::optional<TierSamples> tiers =
      offload_ ? std::optional(offload_->sample()) : std::nullopt;
  recorder_.on_sample(t, s, admission_.size(), queues_.waiting_size(), queues_.running_size(),
                      tiers ? &*tiers : nullptr);
}

void Replica::finish() {
  // Requests a guard kept queued with no timeout when traffic ended can never be admitted now.
  std::vector<int64_t> left;
  for (const auto& [id, r] : requests_) left.push_back(id);
  std::sort(left.begin(), left.end());
  if (!left.empty()) {
    engine_log()->warn("{} request(s) still queued by a guard when the run ended: timed_out",
                       left.size());
  }
  for (int64_t id : left) {
    KVSIM_CHECK(requests_.at(id).phase == Phase::kGuardQueue,
                "request {} still in flight outside a guard queue at the end", id);
    finish_request(id, Outcome::kTimedOut);
  }
}

ReplicaState Replica::observed_state() const {
  const MemorySnapshot s = pool_.snapshot();
  ReplicaState state{.t = events_.now(),
                     .kv_used_bytes = s.kv_live_bytes + s.kv_waste_bytes,
                     .kv_free_bytes = s.kv_free_bytes,
                     .driver_free_bytes = s.driver_free_bytes,
                     .guard_queue = admission_.size(),
                     .waiting = queues_.waiting_size(),
                     .running = queues_.running_size()};
  if (offload_) {
    const TierSamples tiers = offload_->sample();
    state.cpu_tier_bytes = tiers.cpu.bytes;
    if (tiers.disk) state.disk_tier_bytes = tiers.disk->bytes;
  }
  return state;
}

void Replica::check() const {
  pool_.check_invariants();
  KVSIM_CHECK(static_cast<int64_t>(requests_.size()) == admission_.size() + queues_.size(),
              "request bookkeeping: {} in flight vs {} guard-queued + {} admitted",
              requests_.size(), admission_.size(), queues_.size());
  queues_.check();
  if (offload_) offload_->check();
}

}  // namespace kvsim
