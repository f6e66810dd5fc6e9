#include "sim/serving/replica.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "core/check.h"

namespace kvsim {

namespace {

template <class C, class V>
void erase_id(C& c, const V& v) {
  if (auto it = std::find(c.begin(), c.end(), v); it != c.end()) c.erase(it);
}

std::shared_ptr<spdlog::logger> engine_log() {
  auto l = spdlog::get("engine");
  return l ? l : spdlog::default_logger();
}

}  // namespace

Replica::Replica(EventQueue& events, GpuMemoryPool& pool, const LatencyModel& latency,
                 EngineConfig config, std::vector<std::unique_ptr<Guard>> guards,
                 Recorder& recorder)
    : events_(events),
      pool_(pool),
      latency_(latency),
      config_(config),
      guards_(std::move(guards)),
      recorder_(recorder),
      preallocated_(pool.kv().preallocated()),
      deferral_(pool.kv().deferred_growth()) {}

GuardContext Replica::guard_context(const MemorySnapshot& snap) const {
  const KvUsage u = pool_.kv().usage();
  return GuardContext{.now = events_.now(),
                      .memory = snap,
                      .kv = pool_.kv(),
                      .inflight = inflight(),
                      .kv_budget_bytes = u.capacity_bytes > 0 ? u.capacity_bytes
                                                              : pool_.budget().device_bytes_for_torch()};
}

void Replica::arrive(const RequestSpec& spec) {
  recorder_.on_arrival();
  RequestState& r = requests_[spec.id];
  r.spec = spec;
  r.prompt_tokens = spec.prompt_tokens;
  if (down_) {
    finish_request(spec.id, Outcome::kFailedUnavailable);
    return;
  }
  if (!guard_queue_.empty()) {  // first come, first served: no overtaking the queue
    guard_queue_.push_back(spec.id);
    return;
  }
  if (try_admit(r)) kick();
}

bool Replica::try_admit(RequestState& r) {
  const int64_t id = r.spec.id;
  if (!guards_.empty()) {
    const MemorySnapshot snap = pool_.snapshot();
    const GuardContext ctx = guard_context(snap);
    for (size_t i = 0; i < guards_.size(); ++i) {
      const Decision d = guards_[i]->check(r, ctx);
      using A = Decision::Action;
      if (d.action == A::kAdmit) continue;
      engine_log()->debug("t={} req={} {}", events_.now(), id, d.reason);
      if (d.action == A::kTruncate) {
        r.tokens_dropped += r.prompt_tokens - d.new_prompt_tokens;
        r.prompt_tokens = d.new_prompt_tokens;
        r.truncated = true;
        continue;
      }
      if (d.action == A::kQueue) {
        // Guards that already admitted (and reserved) let go: the request is re-checked whole.
        for (size_t j = 0; j < i; ++j) guards_[j]->on_release(r);
        if (r.phase != Phase::kGuardQueue || std::find(guard_queue_.begin(), guard_queue_.end(), id) == guard_queue_.end()) {
          r.phase = Phase::kGuardQueue;
          guard_queue_.push_back(id);
          if (d.timeout >= 0) schedule_timeout(r, d.timeout);
        }
        return false;
      }
      finish_request(id, d.action == A::kReject ? Outcome::kRejected : Outcome::kRejectedTooLong);
      return false;
    }
  }
  erase_id(guard_queue_, id);
  if (r.has_timeout) events_.cancel(r.guard_timeout_event);
  r.has_timeout = false;
  r.phase = Phase::kWaiting;
  waiting_.push_back(id);
  return true;
}

void Replica::schedule_timeout(RequestState& r, SimTime timeout) {
  const int64_t id = r.spec.id;
  r.has_timeout = true;
  r.guard_timeout_event = events_.schedule(timeout, [this, id] {
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second.phase != Phase::kGuardQueue) return;
    it->second.has_timeout = false;
    finish_request(id, Outcome::kTimedOut);
    run_guard_queue();
    kick();
  });
}

void Replica::run_guard_queue() {
  while (!guard_queue_.empty() && !down_) {
    const int64_t id = guard_queue_.front();
    RequestState& r = requests_.at(id);
    const size_t before = guard_queue_.size();
    const bool admitted = try_admit(r);
    if (!admitted && guard_queue_.size() == before && !guard_queue_.empty() &&
        guard_queue_.front() == id) {
      break;  // still refused: the head blocks the queue
    }
  }
}

void Replica::kick() {
  if (busy_ || down_) return;
  start_iteration();
}

void Replica::start_iteration() {
  run_guard_queue();
  Iteration& it = planning_;
  it.clear();
  while (true) {
    const bool ok = config_.scheduler == EngineConfig::Scheduler::kStatic ? plan_static(it)
                                                                            : plan_continuous(it);
    if (!ok) return;  // an OOM ended the plan (crash or abort handled)
    if (!it.prefill_ids.empty() || !it.decode.empty()) break;
    if (running_.empty() && swapped_.empty()) return;  // idle, or waiting for arrivals
    // Nothing can run although requests hold memory: they wait on each other. Swapped requests
    // come back as recomputes; otherwise the newest running request yields its memory
    // (preemption) or, with preemption off, the server is out of memory.
    if (running_.empty()) {
      const int64_t id = swapped_.front();
      RequestState& r = requests_.at(id);
      swapped_.pop_front();
      swap_used_bytes_ -= r.swapped_tokens * pool_.kv().kv_bytes_per_token();
      r.phase = Phase::kWaiting;
      waiting_.push_front(id);
    } else if (preallocated_ && config_.preemption != EngineConfig::Preemption::kOff &&
               running_.size() > 1) {
      preempt(running_.back()->spec.id, it);
    } else {
      AllocResult stuck = AllocResult::failure(OomReason::kCapacity, 0, 0, 0);
      oom(running_.back()->spec.id, stuck);
      return;
    }
    it.clear();
  }
  BatchShape shape;
  const PagedBlocks* paged = pool_.kv().paged();
  shape.block_tokens = paged != nullptr ? static_cast<int>(paged->block_tokens()) : 0;
  std::vector<BatchChunk>& chunks = chunk_scratch_;
  chunks.clear();
  for (size_t i = 0; i < it.prefill_ids.size(); ++i) {
    const RequestState& r = requests_.at(it.prefill_ids[i]);
    const int64_t chunk = it.prefill_chunks[i];
    shape.prefill.push_back(
        {.tokens = chunk, .context_tokens = r.prefilled, .emits_token = r.prefilled + chunk >= r.prefill_target});
    chunks.push_back({.query_tokens = chunk, .context_tokens = r.prefilled + chunk});
  }
  // Decode sequences enter the latency and activation models through their count and context
  // sum only (exact integer sums; see BatchShape): no per-sequence entries.
  const int64_t decode_context = it.decode_context;
  if (check_) {
    int64_t sum = 0;
    for (const RequestState* r : it.decode) sum += r->context_tokens();
    KVSIM_CHECK(sum == decode_context, "decode context {} != tracked {}", sum, decode_context);
  }
  shape.decode_seqs = static_cast<int64_t>(it.decode.size());
  shape.decode_context_tokens = decode_context;
  if (AllocResult a = pool_.reserve_activations(chunks, shape.decode_seqs, decode_context); !a) {
    oom(it.prefill_ids.empty() ? it.decode.back()->spec.id : it.prefill_ids.back(), a);
    return;
  }
  report_deferred();
  if (check_) {
    // The checks compare the store's per-request figures with its totals: settle first.
    for (RequestState* r : running_) settle_kv(*r);
  }
  recorder_.on_memory(pool_.snapshot());
  if (check_) check();
  const double seconds = latency_.iteration(shape).seconds + it.extra_seconds;
  busy_ = true;
  std::swap(in_flight_, planning_);
  events_.schedule(std::max<SimTime>(1, seconds_to_sim(seconds)), [this] { end_iteration(); });
}

bool Replica::plan_continuous(Iteration& it) {
  if (!swapped_.empty()) try_swap_in(it);
  if (!grow_decodes(it)) return false;
  return admit_prefills(it);
}

bool Replica::plan_static(Iteration& it) {
  if (!running_.empty()) {
    for (const RequestState* r : running_) {
      if (!r->decoding) return admit_prefills(it);  // cannot happen: whole prefills
    }
    return grow_decodes(it);
  }
  // A new fixed batch: up to batch_size waiting requests, prefilled together and whole.
  const EngineConfig saved = config_;
  config_.max_num_seqs = config_.batch_size;
  config_.chunked_prefill = false;
  const bool ok = admit_prefills(it);
  config_ = saved;
  return ok;
}

bool Replica::grow_decodes(Iteration& it) {
  // A copy: preemption removes requests from running_ during the walk. Preempted ones stay in
  // requests_ (so the addresses stay valid); their phase tells them apart. Only oom() removes
  // requests, and it ends the walk.
  order_scratch_.assign(running_.begin(), running_.end());
  int64_t prefilling = 0;
  for (RequestState* rp : order_scratch_) {
    RequestState& r = *rp;
    if (r.phase != Phase::kRunning) continue;
    if (!r.decoding) {
      ++prefilling;
      continue;
    }
    const int64_t id = r.spec.id;
    const int64_t target = r.prompt_tokens + r.generated;
    // The usual step stays inside the last block: no store call (deferred growth), and the
    // same figures as ensure_kv's (usage() counts the token at once; see KvStore).
    if (target <= r.kv_tokens || target - r.kv_tokens <= r.kv_room) {
      if (target > r.kv_tokens) {
        const int64_t d = target - r.kv_tokens;
        r.kv_tokens = target;
        r.kv_room -= d;
        r.kv_deferred += d;
        unreported_deferred_ += d;
      }
      it.decode.push_back(rp);
      it.decode_context += r.context_tokens();
      continue;
    }
    settle_kv(r);
    while (true) {
      AllocResult a = ensure_kv(id, target);
      if (a) {
        if (deferral_ != nullptr) {
          r.kv_tokens = pool_.kv().tokens(id);
          r.kv_room = deferral_->room(id);
        }
        it.decode.push_back(rp);
        it.decode_context += r.context_tokens();
        break;
      }
      const bool can_preempt = preallocated_ && config_.preemption != EngineConfig::Preemption::kOff;
      if (!can_preempt) {
        oom(id, a);
        return false;
      }
      const RequestState* victim = running_.back();
      preempt(victim->spec.id, it);
      if (victim == rp) break;
    }
  }
  it.running_prefills = prefilling;
  report_deferred();
  return true;
}

void Replica::report_deferred() {
  if (unreported_deferred_ == 0) return;
  deferral_->add(unreported_deferred_);
  unreported_deferred_ = 0;
}

void Replica::settle_kv(RequestState& r) {
  report_deferred();  // the store's totals first, so any snapshot it takes is whole
  if (r.kv_deferred == 0) return;
  deferral_->settle(r.spec.id, r.kv_deferred);
  r.kv_deferred = 0;
}

bool Replica::admit_prefills(Iteration& it) {
  int64_t budget = config_.max_num_batched_tokens - static_cast<int64_t>(it.decode.size());
  const bool chunked = config_.chunked_prefill;
  // Unfinished chunked prefills of running requests go first.
  // Only prefilling running requests matter here; with none (the usual case of a full decode
  // batch) the walk is skipped.
  if (it.running_prefills != 0) order_scratch_.assign(running_.begin(), running_.end());
  else order_scratch_.clear();
  for (RequestState* rp : order_scratch_) {
    RequestState& r = *rp;
    const int64_t id = r.spec.id;
    if (r.decoding || r.prefilled >= r.prefill_target || budget <= 0) continue;
    if (std::find(it.prefill_ids.begin(), it.prefill_ids.end(), id) != it.prefill_ids.end()) continue;
    const int64_t chunk = std::min(r.prefill_target - r.prefilled, budget);
    if (AllocResult a = ensure_kv(id, r.prefilled + chunk); !a) {
      if (preallocated_) break;
      oom(id, a);
      return false;
    }
    it.prefill_ids.push_back(id);
    it.prefill_chunks.push_back(chunk);
    budget -= chunk;
  }
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int64_t>(running_.size()) < config_.max_num_seqs) {
    const int64_t id = waiting_.front();
    RequestState& r = requests_.at(id);
    const int64_t target = r.context_tokens();
    // Without chunking a prompt runs whole; one longer than the budget runs alone.
    if (!chunked && target > budget && !it.prefill_ids.empty()) break;
    const int64_t chunk = chunked ? std::min(target, budget) : target;
    const PrefixHashes prefix{.hashes = r.spec.prefix_hashes, .block_tokens = r.spec.hash_block_tokens};
    AllocResult a = pool_.allocate_kv(id, chunk, std::max(r.max_total_tokens(), target), prefix);
    if (!a) {
      if (!preallocated_) {
        oom(id, a);
        return false;
      }
      if (running_.empty() && it.prefill_ids.empty() && swapped_.empty()) {
        finish_request(id, Outcome::kRejectedTooLong);  // an empty pool cannot hold it
        continue;
      }
      break;  // wait for blocks to free up
    }
    waiting_.pop_front();
    forget_kv(r);
    r.phase = Phase::kRunning;
    r.prefill_target = target;
    r.prefilled = 0;
    r.decoding = false;
    running_.push_back(&r);
    it.prefill_ids.push_back(id);
    it.prefill_chunks.push_back(chunk);
    budget -= chunk;
  }
  return true;
}

AllocResult Replica::ensure_kv(int64_t id, int64_t tokens) {
  // A plan cut short by an aborted request may already have grown this one: growth is
  // idempotent per target.
  return pool_.ensure_kv(id, tokens);
}

void Replica::end_iteration() {
  const Iteration& it = in_flight_;
  busy_ = false;
  recorder_.on_iteration();
  pool_.release_activations();
  const SimTime now = events_.now();
  std::vector<int64_t> done;
  for (size_t i = 0; i < it.prefill_ids.size(); ++i) {
    auto f = requests_.find(it.prefill_ids[i]);
    if (f == requests_.end() || f->second.phase != Phase::kRunning) continue;
    RequestState& r = f->second;
    r.prefilled += it.prefill_chunks[i];
    if (r.prefilled < r.prefill_target) continue;
    r.decoding = true;
    ++r.generated;
    if (r.first_token_at < 0) r.first_token_at = now;
    if (r.generated >= r.spec.output_tokens) done.push_back(r.spec.id);
  }
  for (RequestState* rp : it.decode) {
    RequestState& r = *rp;
    if (r.phase != Phase::kRunning) continue;
    ++r.generated;
    if (r.generated >= r.spec.output_tokens) done.push_back(r.spec.id);
  }
  for (int64_t id : done) {
    finish_request(id, requests_.at(id).truncated ? Outcome::kCompletedTruncated : Outcome::kCompleted);
  }
  kick();
}

void Replica::preempt(int64_t id, Iteration& it) {
  RequestState& r = requests_.at(id);
  recorder_.on_preemption();
  ++r.preemptions;
  erase_id(running_, &r);
  if (auto d = std::find(it.decode.begin(), it.decode.end(), &r); d != it.decode.end()) {
    it.decode.erase(d);
    it.decode_context -= r.context_tokens();
  }
  settle_kv(r);
  const int64_t tokens = pool_.kv().tokens(id);
  const int64_t bytes = tokens * pool_.kv().kv_bytes_per_token();
  pool_.release_kv(id);
  forget_kv(r);
  r.decoding = false;
  r.prefilled = 0;
  if (config_.preemption == EngineConfig::Preemption::kSwap &&
      swap_used_bytes_ + bytes <= config_.swap_space_bytes && r.generated > 0) {
    swap_used_bytes_ += bytes;
    r.swapped_tokens = tokens;
    r.phase = Phase::kSwapped;
    swapped_.push_back(id);
    it.extra_seconds += static_cast<double>(bytes) / pool_.gpu().pcie_bytes_per_s;
    return;
  }
  r.phase = Phase::kWaiting;  // recompute: prefill again over prompt + generated
  waiting_.push_front(id);
}

bool Replica::try_swap_in(Iteration& it) {
  while (!swapped_.empty() && static_cast<int64_t>(running_.size()) < config_.max_num_seqs) {
    const int64_t id = swapped_.front();
    RequestState& r = requests_.at(id);
    if (!pool_.allocate_kv(id, r.swapped_tokens, std::max(r.max_total_tokens(), r.swapped_tokens))) break;
    const int64_t bytes = r.swapped_tokens * pool_.kv().kv_bytes_per_token();
    swap_used_bytes_ -= bytes;
    it.extra_seconds += static_cast<double>(bytes) / pool_.gpu().pcie_bytes_per_s;
    swapped_.pop_front();
    forget_kv(r);
    r.phase = Phase::kRunning;
    r.decoding = true;
    r.prefill_target = r.swapped_tokens;
    r.prefilled = r.swapped_tokens;
    running_.push_back(&r);
  }
  return true;
}

void Replica::oom(int64_t culprit, const AllocResult& why) {
  recorder_.on_oom();
  pool_.release_activations();
  engine_log()->info("t={} OOM on req={}: {}", events_.now(), culprit, why.message());
  if (config_.on_oom == EngineConfig::OnOom::kAbortRequest) {
    if (requests_.count(culprit)) finish_request(culprit, Outcome::kLostOom);
    events_.schedule(0, [this] { kick(); });
    return;
  }
  // Crash: the process dies with everything it held; the server is down for restart_s.
  std::vector<int64_t> lost;
  for (const auto& [id, r] : requests_) lost.push_back(id);
  std::sort(lost.begin(), lost.end());
  for (int64_t id : lost) finish_request(id, Outcome::kLostOom);
  for (auto& g : guards_) g->on_restart();
  pool_.restart();
  down_ = true;
  busy_ = false;
  recorder_.on_restart();
  events_.schedule(config_.restart, [this] { restart_done(); });
}

void Replica::restart_done() {
  down_ = false;
  if (check_) check();
  kick();
}

void Replica::release_memory(RequestState& r) {
  if (pool_.kv().holds(r.spec.id)) {
    settle_kv(r);
    pool_.release_kv(r.spec.id);
  }
  forget_kv(r);
  if (r.phase == Phase::kSwapped) swap_used_bytes_ -= r.swapped_tokens * pool_.kv().kv_bytes_per_token();
}

void Replica::finish_request(int64_t id, Outcome outcome) {
  auto f = requests_.find(id);
  KVSIM_CHECK(f != requests_.end(), "finishing unknown request {}", id);
  RequestState& r = f->second;
  KVSIM_CHECK(r.outcome == Outcome::kNone, "request {} ends twice ({} then {})", id,
              outcome_name(r.outcome), outcome_name(outcome));
  // The iteration in flight holds running requests by address until it ends.
  KVSIM_CHECK(!busy_ || r.phase != Phase::kRunning,
              "request {} finishes while its iteration is in flight", id);
  release_memory(r);
  for (auto& g : guards_) g->on_release(r);
  switch (r.phase) {
    case Phase::kGuardQueue: erase_id(guard_queue_, id); break;
    case Phase::kWaiting: erase_id(waiting_, id); break;
    case Phase::kRunning: erase_id(running_, &r); break;
    case Phase::kSwapped: erase_id(swapped_, id); break;
    case Phase::kDone: break;
  }
  if (r.has_timeout) events_.cancel(r.guard_timeout_event);
  r.phase = Phase::kDone;
  r.outcome = outcome;
  r.finished_at = events_.now();
  recorder_.on_outcome(r);
  const RequestState copy = r;
  requests_.erase(f);
  if (on_finished_) on_finished_(copy);
}

void Replica::sample() {
  recorder_.on_sample(events_.now(), pool_.snapshot(), static_cast<int64_t>(guard_queue_.size()),
                      static_cast<int64_t>(waiting_.size()), static_cast<int64_t>(running_.size()));
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

void Replica::check() const {
  pool_.check_invariants();
  KVSIM_CHECK(requests_.size() ==
                  guard_queue_.size() + waiting_.size() + running_.size() + swapped_.size(),
              "request bookkeeping: {} in flight vs {} + {} + {} + {} queued", requests_.size(),
              guard_queue_.size(), waiting_.size(), running_.size(), swapped_.size());
  for (const RequestState* r : running_) {
    const int64_t id = r->spec.id;
    auto f = requests_.find(id);
    KVSIM_CHECK(f != requests_.end() && &f->second == r && r->phase == Phase::kRunning,
                "running request {} is not in flight as running", id);
    KVSIM_CHECK(pool_.kv().holds(id), "running request {} holds no KV", id);
    if (r->kv_tokens > 0) {  // the engine's view of deferred growth matches the store
      KVSIM_CHECK(r->kv_deferred == 0 && pool_.kv().tokens(id) == r->kv_tokens &&
                      deferral_->room(id) == r->kv_room,
                  "request {}: engine sees {} KV tokens (+{} room, {} unsettled), store {} (+{})",
                  id, r->kv_tokens, r->kv_room, r->kv_deferred, pool_.kv().tokens(id),
                  deferral_->room(id));
    }
  }
  for (int64_t id : waiting_) {
    KVSIM_CHECK(!pool_.kv().holds(id), "waiting request {} still holds KV", id);
  }
}

}  // namespace kvsim
