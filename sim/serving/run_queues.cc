#include "sim/serving/run_queues.h"

#include <algorithm>
#include <tuple>

#include "core/check.h"
#include "models/memory/kv_capabilities.h"
#include "sim/serving/step_decodes.h"

namespace kvsim {

namespace {

template <class C, class V>
void erase_from(C& c, const V& v) {
  if (auto it = std::find(c.begin(), c.end(), v); it != c.end()) c.erase(it);
}

}  // namespace

RunQueues::RunQueues(std::unordered_map<int64_t, RequestState>& requests, GpuMemoryPool& pool,
                     KvLedger& ledger, Recorder& recorder, const EngineConfig& config, Hooks hooks)
    : requests_(requests),
      pool_(pool),
      ledger_(ledger),
      recorder_(recorder),
      preemption_(config.preemption),
      swap_space_bytes_(config.swap_space_bytes),
      preallocated_(pool.kv().preallocated()),
      hooks_(std::move(hooks)),
      waiting_(make_request_queue(config.scheduling_policy, requests)),
      swapped_(make_request_queue(config.scheduling_policy, requests)),
      spec_k_(config.speculative ? config.speculative->num_speculative_tokens : 0),
      spec_lookahead_(config.speculative ? config.speculative->lookahead_tokens() : 0),
      max_model_len_(config.max_model_len),
      max_batched_tokens_(config.max_num_batched_tokens) {
  set_decodes(nullptr);
  if (const PagedBlocks* paged = pool.kv().paged(); paged != nullptr && paged->prefix_caching()) {
    recorder_.on_prefix_caching();  // the summary reports prefix hits for this policy
  }
}

void RunQueues::set_decodes(std::unique_ptr<DecodeSet> decodes) {
  KVSIM_CHECK(size() == 0, "the decoding set is switched with requests admitted");
  decodes_ = decodes != nullptr ? std::move(decodes) : std::make_unique<StepDecodes>(*this);
}

const RequestState* RunQueues::last_decoding() const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if ((*it)->decoding()) return *it;
  }
  return nullptr;
}

void RunQueues::prefilled(RequestState& r, bool done) {
  if (hooks_.observe) hooks_.observe(r, RequestEventKind::kPrefillDone);
  decodes_->prefilled(r, done);
}

bool RunQueues::all_running_decode() const {
  return std::all_of(running_.begin(), running_.end(),
                     [](const RequestState* r) { return r->decoding(); });
}

RequestState* RunQueues::preemption_victim() const {
  KVSIM_CHECK(!running_.empty(), "no running request to preempt");
  return waiting_->preemption_victim(running_);
}

void RunQueues::admit(RequestState& r) {
  r.phase = Phase::kWaiting;
  waiting_->add(r.spec.id, false);
}

void RunQueues::hold(RequestState& r, SimTime at) {
  r.phase = Phase::kWaiting;
  held_.emplace_back(at, r.spec.id);
}

void RunQueues::release_held(SimTime cutoff) {
  while (!held_.empty() && held_.front().first <= cutoff) {
    const int64_t id = held_.front().second;
    held_.pop_front();
    waiting_->add(id, false);
  }
}

void RunQueues::admit_transferred(RequestState& r) {
  r.phase = Phase::kSwapped;
  r.swapped_tokens = r.context_tokens();  // the prompt and the first token
  swapped_->add(r.spec.id, false);
}

void RunQueues::receive(RequestState& r) {
  KVSIM_CHECK(r.phase == Phase::kReceiving, "request {} received while not receiving", r.spec.id);
  --receiving_;
  r.phase = Phase::kRunning;
  enter_running(r);
  decodes_->join(r);  // decoding at once
}

void RunQueues::hand_off(RequestState& r) {
  KVSIM_CHECK(r.phase == Phase::kRunning, "request {} handed off while not running", r.spec.id);
  erase_from(running_, &r);
  ledger_.settle(r);
  r.phase = Phase::kHandingOff;
  ++handing_off_;
}

void RunQueues::remove(RequestState& r) {
  switch (r.phase) {
    case Phase::kWaiting:
      if (auto h = std::find_if(held_.begin(), held_.end(),
                                [&](const auto& e) { return e.second == r.spec.id; });
          h != held_.end()) {
        held_.erase(h);
      } else {
        waiting_->erase(r.spec.id);
      }
      break;
    case Phase::kRunning:
      erase_from(running_, &r);
      // (A decoding one left the decoding set already: finish_request.)
      if (!r.decoding()) decodes_->leave(r);
      break;
    case Phase::kSwapped:
      if (!r.kv_transferred) swap_used_bytes_ -= r.swapped_tokens * pool_.kv().kv_bytes_per_token();
      swapped_->erase(r.spec.id);
      break;
    case Phase::kReceiving: --receiving_; break;
    case Phase::kLoading: --loading_; break;
    case Phase::kHandingOff: --handing_off_; break;
    case Phase::kGuardQueue:
    case Phase::kDone: break;
  }
}

void RunQueues::unswap_oldest() {
  const int64_t id = swapped_->front();
  RequestState& r = requests_.at(id);
  swapped_->pop_front();
  // A transferred request that cannot fit even alone computes its KV again here instead.
  const bool abandoned = r.kv_transferred;
  if (!r.kv_transferred) swap_used_bytes_ -= r.swapped_tokens * pool_.kv().kv_bytes_per_token();
  r.kv_transferred = false;
  r.phase = Phase::kWaiting;
  waiting_->add(id, true);
  if (abandoned && hooks_.abandoned) hooks_.abandoned(r);
}

bool RunQueues::grow_decodes(IterationPlan& it) { return decodes_->grow(it); }

bool RunQueues::grow_each_decode(IterationPlan& it) {
  // Walks running_ as it was when the walk started. Until the first preemption nothing changes
  // running_, so the walk reads it in place; preemption removes requests from it, so the walk
  // switches to a copy just before the first one (the same order either way, without copying
  // the batch every iteration). Preempted ones stay in requests_ (so the addresses stay valid);
  // their phase tells them apart. Only an OOM removes requests, and it ends the walk.
  const std::vector<RequestState*>* order = &running_;
  int64_t prefilling = 0;
  bool stopped = false;
  for (size_t i = 0; i < order->size(); ++i) {
    RequestState* rp = (*order)[i];
    RequestState& r = *rp;
    if (r.phase != Phase::kRunning) continue;
    if (!r.decoding()) {
      ++prefilling;
      continue;
    }
    // Async scheduling: its last token is in flight (it finishes when that step's output comes;
    // vLLM's schedule() skips a request whose placeholders reach max_tokens). Never the case when
    // plans wait for the step before.
    if (spec_k_ > 0 ? !spec_due(r) : r.generated >= r.spec.output_tokens) continue;
    int64_t target = r.prompt_tokens + r.generated;
    if (spec_k_ > 0 && !speculate(r, it, target)) {
      it.running_walk_ended = true;  // vLLM's running loop ends when the token budget is spent
      break;
    }
    // The usual step stays inside the last block: no store call (deferred growth), and the
    // same figures as the slow path's (usage() counts the token at once; see DeferredGrowth).
    if (ledger_.defer(r, target)) {
      it.decode.push_back(rp);
      it.spec_tokens += r.spec_drafts;
      it.decode_context += pool_.model().attended_tokens(r.context_tokens());
      continue;
    }
    ledger_.settle(r);
    while (true) {
      AllocResult a = ledger_.grow_decode(r, target);
      if (a) {
        it.decode.push_back(rp);
        it.spec_tokens += r.spec_drafts;
        it.decode_context += pool_.model().attended_tokens(r.context_tokens());
        break;
      }
      if (!can_preempt()) {
        hooks_.oom(r.spec.id, a);
        return false;
      }
      if (order == &running_) {
        order_scratch_.assign(running_.begin(), running_.end());
        order = &order_scratch_;
      }
      RequestState* victim = preemption_victim();
      preempt(*victim, it);
      if (victim == rp) {
        // vLLM ends its walk over the running requests at one that preempted itself. Under
        // fcfs it is the last one anyway; under priority the ones after it wait this step out
        // (the decode aggregate is off under priority: its members all grow every step).
        stopped = waiting_->walk_ends_at_self_preemption();
        break;
      }
    }
    if (stopped) {
      it.running_walk_ended = true;
      break;
    }
  }
  it.running_prefills = prefilling;
  it.decode_seqs = static_cast<int64_t>(it.decode.size());
  ledger_.report();
  return true;
}

void RunQueues::preempt(RequestState& r, IterationPlan& it) {
  const int64_t id = r.spec.id;
  ++it.preempted;
  decodes_->leave(r);  // its figures, as the walk would have them now
  recorder_.on_preemption();
  ++r.preemptions;
  r.preempted_at = hooks_.now();
  erase_from(running_, &r);
  if (auto d = std::find(it.decode.begin(), it.decode.end(), &r); d != it.decode.end()) {
    it.decode.erase(d);
    it.spec_tokens -= r.spec_drafts;  // its drafts' budget is free again
    // (With the aggregate, the count and the sum are taken at the end of the walk.)
    it.decode_context -= pool_.model().attended_tokens(r.context_tokens());
  }
  if (async_ && r.decoding()) uncache_in_flight(r);
  const int64_t tokens = ledger_.release(r);
  const int64_t bytes = tokens * pool_.kv().kv_bytes_per_token();
  r.prefilled = 0;
  if (hooks_.preempted) hooks_.preempted(r);  // its KV is free now
  if (preemption_ == EngineConfig::Preemption::kSwap &&
      swap_used_bytes_ + bytes <= swap_space_bytes_ && r.generated > 0) {
    swap_used_bytes_ += bytes;
    r.swapped_tokens = tokens;
    r.phase = Phase::kSwapped;
    swapped_->add(id, false);
    it.extra_seconds += static_cast<double>(bytes) / pool_.gpu().pcie_bytes_per_s;
  } else {
    r.phase = Phase::kWaiting;  // recompute: prefill again over prompt + generated
    waiting_->add(id, true);
  }
  if (hooks_.observe) hooks_.observe(r, RequestEventKind::kPreempted);
}

void RunQueues::uncache_in_flight(RequestState& r) {
  // Under async scheduling vLLM hashes a token's block only once the token's id is known (its
  // step's output), so a decode's cached blocks stop one token short of the KV it was given
  // (scheduler.py caches through num_tokens at allocate_slots, AsyncScheduler through
  // num_computed_tokens - num_output_placeholders at the output): the block its newest KV token
  // filled is not cached when it is preempted. Not so while its KV ends at its prefill, whose
  // tokens were all known (the recompute's last chunk).
  PagedBlocks* paged = pool_.kv().paged_blocks();
  if (paged == nullptr || !paged->prefix_caching()) return;
  ledger_.settle(r);
  const int64_t tokens = pool_.kv().tokens(r.spec.id);
  if (tokens > r.prefill_target) paged->uncache_past(r.spec.id, tokens - 1);
}

void RunQueues::swap_in(IterationPlan& it, const BatchLimits& limits) {
  // Requests receiving their KV join the batch when their transfer ends: they count already.
  while (!swapped_->empty() &&
         static_cast<int64_t>(running_.size()) + receiving_ < limits.max_num_seqs) {
    const int64_t id = swapped_->front();
    RequestState& r = requests_.at(id);
    if (!pool_.allocate_kv(id, r.swapped_tokens, std::max(r.max_total_tokens(), r.swapped_tokens)))
      break;
    swapped_->pop_front();
    KvLedger::forget(r);
    r.prefill_target = r.swapped_tokens;
    r.prefilled = r.swapped_tokens;  // decoding at once
    if (r.kv_transferred) {          // the decode side pulls: the KV crosses the link now
      r.kv_transferred = false;
      r.phase = Phase::kReceiving;
      ++receiving_;
      if (hooks_.pulled) hooks_.pulled(r);
      continue;
    }
    const int64_t bytes = r.swapped_tokens * pool_.kv().kv_bytes_per_token();
    swap_used_bytes_ -= bytes;
    it.extra_seconds += static_cast<double>(bytes) / pool_.gpu().pcie_bytes_per_s;
    r.phase = Phase::kRunning;
    r.end_preemption(hooks_.now());
    enter_running(r);
    decodes_->join(r);  // decoding at once
    if (hooks_.observe) hooks_.observe(r, RequestEventKind::kSwappedIn);
  }
}

void RunQueues::check() const {
  for (const RequestState* r : running_) {
    const int64_t id = r->spec.id;
    auto f = requests_.find(id);
    KVSIM_CHECK(f != requests_.end() && &f->second == r && r->phase == Phase::kRunning,
                "running request {} is not in flight as running", id);
    KVSIM_CHECK(pool_.kv().holds(id), "running request {} holds no KV", id);
    KVSIM_CHECK(r->kv_tokens == 0 && r->kv_deferred == 0,
                "running request {} has a deferral window open at a check", id);
  }
  for (int64_t id : *waiting_) {
    KVSIM_CHECK(!pool_.kv().holds(id), "waiting request {} still holds KV", id);
  }
  int64_t receiving = 0, handing_off = 0, loading = 0;
  for (const auto& [id, r] : requests_) {
    if (r.phase == Phase::kLoading) {
      ++loading;
      KVSIM_CHECK(pool_.kv().holds(id), "request {} holds no KV while its prefix loads", id);
    }
    if (r.phase != Phase::kReceiving && r.phase != Phase::kHandingOff) continue;
    (r.phase == Phase::kReceiving ? receiving : handing_off) += 1;
    KVSIM_CHECK(pool_.kv().holds(id), "request {} holds no KV during its transfer", id);
  }
  KVSIM_CHECK(loading == loading_, "{} requests loading vs counted {}", loading, loading_);
  KVSIM_CHECK(receiving == receiving_ && handing_off == handing_off_,
              "transfers: {} receiving, {} handing off vs counted {}, {}", receiving, handing_off,
              receiving_, handing_off_);
}

}  // namespace kvsim
