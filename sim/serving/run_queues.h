// RunQueues: the admitted requests of a replica (waiting, running, swapped) and the plan steps a
// Scheduler composes into an iteration: swap in, grow the decodes (the decode fast path through
// KvLedger), admit prefills, and preemption (recompute, or swap to host memory) when KV blocks run
// short. What it cannot decide itself, an OOM, a request that can never fit, or the guards'
// scheduler-side checks (vLLM's watermark), it hands to the replica through Hooks, which owns
// outcomes and guards.
//
// engine.scheduling_policy orders the waiting and swapped queues and picks the preemption
// victim: one RequestQueue class per policy (request_queue.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "models/memory/gpu_memory_pool.h"
#include "sim/guards/guard.h"
#include "sim/metrics/observer.h"
#include "sim/metrics/recorder.h"
#include "sim/request/outcome.h"
#include "sim/serving/decode_set.h"
#include "sim/serving/engine_config.h"
#include "sim/serving/kv_ledger.h"
#include "sim/serving/request_queue.h"
#include "sim/serving/scheduler.h"

namespace kvsim {

class RunQueues final : public PlanSteps {
 public:
  struct Hooks {
    std::function<void(int64_t culprit, const AllocResult& why)> oom;  // crash or abort
    std::function<void(int64_t id, Outcome outcome)> finish;           // ends a request
    // The guards' scheduler-side check before `tokens` of KV are allocated for the waiting
    // request `r` (AdmissionQueue::check_allocation); absent = always kOk.
    std::function<AllocFit(const RequestState& r, int64_t tokens)> check_allocation;
    std::function<void(RequestState& r)> scheduled;  // a waiting request entered the running batch
    std::function<void(const RequestState& r)> preempted;  // `r` was just preempted (may be empty)
    std::function<SimTime()> now;  // the simulated time (the latency breakdown's timestamps)
    // Disaggregated serving, decode side (may be empty): `r`'s KV is allocated here (kReceiving:
    // its transfer may start); `r` gave up waiting for room and recomputes here (its prefill
    // replica's copy is not needed any more).
    std::function<void(const RequestState& r)> pulled;
    std::function<void(const RequestState& r)> abandoned;
    // A request's event for the replica's observer (kPreempted, kSwappedIn, kPrefillDone; may be
    // empty).
    std::function<void(const RequestState& r, RequestEventKind kind)> observe;
    // KV offloading (may be empty; sim/serving/offload/offload_connector.h): the tokens past
    // `cached` (the GPU prefix hit) that the CPU tier would load for the waiting request `r`
    // whose sequence is `target` tokens; and the start of that load once its KV is allocated.
    std::function<int64_t(const RequestState& r, int64_t cached, int64_t target)> offload_match;
    std::function<void(RequestState& r, int64_t cached, int64_t hit)> offload_load;
  };
  // Collaborators are borrowed; they must outlive the queues. `requests` holds every request in
  // flight; the queues hold its elements by id or address.
  RunQueues(std::unordered_map<int64_t, RequestState>& requests, GpuMemoryPool& pool,
            KvLedger& ledger, Recorder& recorder, const EngineConfig& config, Hooks hooks);

  // PlanSteps
  bool has_running() const override { return !running_.empty(); }
  bool has_swapped() const override { return !swapped_->empty(); }
  bool all_running_decode() const override;
  void swap_in(IterationPlan& it, const BatchLimits& limits) override;
  bool grow_decodes(IterationPlan& it) override;
  bool admit_prefills(IterationPlan& it, const BatchLimits& limits) override;
  bool walk_running(IterationPlan& it, const BatchLimits& limits) override;  // run_queues_walk.cc

  // The decoding requests' set (decode_set.h): the plain one (StepDecodes) unless another is set,
  // with no request admitted (the fast-forward's aggregate; nullptr: the plain one again).
  void set_decodes(std::unique_ptr<DecodeSet> decodes);
  // Writes r's figures out and takes it out of the decoding set (before anything reads them: its
  // outcome, its KV's release). A no-op for a request not in it.
  void leave_decodes(RequestState& r) { decodes_->leave(r); }
  // How far r's stored figures lag its true ones (DecodeSet::lag).
  AggregateLag lag(const RequestState& r) const { return decodes_->lag(r); }
  // r's (re)prefill just ended (its first token came; the observer hears it); `done`: it has all
  // its tokens (it will finish), else it decodes from the next step on.
  void prefilled(RequestState& r, bool done);
  // The step `it` ran (end_iteration, before its prefills are counted): its decodes get their
  // token and the completed ones (in running order) are appended to `done`.
  void commit_decodes(const IterationPlan& it, std::vector<int64_t>& done) {
    decodes_->commit(it, done);
  }
  // What a decode gains when its step ends (StepDecodes::commit): with speculative decoding, one
  // token and its accepted drafts (Speculator::tokens_gained); empty (the default): one token.
  // Only stepping's set reads it: the fast-forward is off with speculation.
  using DecodeGain = std::function<int64_t(RequestState&)>;
  void set_decode_gain(DecodeGain gain) { decode_gain_ = std::move(gain); }
  const DecodeGain& decode_gain() const { return decode_gain_; }
  // Stepping's decode walk (StepDecodes::grow): every decoding request in running order grows by
  // one token through the ledger, a shortage preempting the policy's victim.
  bool grow_each_decode(IterationPlan& it);
  // An OOM the plan cannot meet (hooks.oom: crash or abort); the plan ends.
  void oom(int64_t culprit, const AllocResult& why) { hooks_.oom(culprit, why); }
  // The first running request still prefilling, in running order; nullptr when none.
  const RequestState* first_prefilling() const { return decodes_->first_prefilling(); }
  // The last decoding request in running order (an OOM's culprit); nullptr when none.
  const RequestState* last_decoding() const;

  // KV offloading: the hooks into the CPU tier's connector (Hooks::offload_match, offload_load).
  void set_offload(decltype(Hooks::offload_match) match, decltype(Hooks::offload_load) load) {
    hooks_.offload_match = std::move(match);
    hooks_.offload_load = std::move(load);
  }
  // A request passed the guards: it waits for its prefill.
  void admit(RequestState& r);
  // Disaggregated serving (docs/cluster.md). admit_transferred: a request whose KV is on a
  // prefill replica waits in the swapped queue (no host copy, no PCIe time) until its prompt and
  // first token fit; swap_in then allocates them and moves it to kReceiving (hooks.pulled).
  // receive: its transfer ended: it joins the running batch, decoding. hand_off (prefill side):
  // a running request whose first token is out leaves the batch and keeps its KV (kHandingOff)
  // until its transfer ends. Requests in either state hold KV outside the three queues.
  void admit_transferred(RequestState& r);
  void receive(RequestState& r);
  void hand_off(RequestState& r);
  int64_t receiving() const { return receiving_; }
  int64_t handing_off() const { return handing_off_; }
  // KV offloading: `r` (kLoading: its KV allocated, its prefix loading from the CPU tier) has
  // its prefix. Its blocks go back to the GPU prefix cache, keyed, and it waits at the front of
  // the waiting queue, where its admission finds them as prefix hits (vLLM's
  // _update_waiting_for_remote_kv caches the loaded blocks and the request waits again).
  void loaded(RequestState& r);
  int64_t loading() const { return loading_; }
  // Takes a request out of whichever queue its phase names (it is finishing).
  void remove(RequestState& r);
  // Preempts `r` (running): its KV is freed, and it is swapped out or waits to recompute.
  void preempt(RequestState& r, IterationPlan& it);
  // Whether a KV shortage may be met by preempting (preallocated KV, preemption on).
  bool can_preempt() const {
    return preallocated_ && preemption_ != EngineConfig::Preemption::kOff;
  }
  // The first swapped request (the oldest under fcfs) comes back as a recompute: waiting at the
  // front under fcfs, in its place by the policy's key otherwise.
  void unswap_oldest();
  // The running request a KV shortage preempts first under the scheduling policy. Requires: one
  // is running.
  RequestState* preemption_victim() const;
  // Whether a walk over the running requests may end before some of them (the policy's
  // RequestQueue::walk_ends_at_self_preemption): their decodes then do not all grow every step.
  bool walk_may_end_early() const { return waiting_->walk_ends_at_self_preemption(); }

  // Whether admit_prefills, after a grow_decodes of `decoding` requests, runs no chunk, admits
  // nothing and makes no call with an effect, and keeps doing so while free blocks only shrink
  // (a fast-forward stretch): no token budget left, or the first running prefill stalled (its
  // next chunk's blocks are not free) and then no waiting request, or max_num_seqs running, or
  // (without allocation-checking guards, `guarded` false) a head that needs more free paged
  // blocks than there are now. Conservative: false whenever unsure. `extra_free`: as if that
  // many more blocks were free (those a plan's decode walk frees before admitting).
  bool prefills_blocked(const BatchLimits& limits, bool guarded, int64_t decoding,
                        int64_t extra_free = 0) const;

  // Admission order. Elements of the requests map.
  const std::vector<RequestState*>& running() const { return running_; }
  // (Loading requests are in vLLM's waiting queue, as WAITING_FOR_REMOTE_KVS.)
  int64_t waiting_size() const {
    return static_cast<int64_t>(waiting_->size() + held_.size()) + loading_;
  }
  int64_t running_size() const { return static_cast<int64_t>(running_.size()); }
  int64_t size() const {
    return static_cast<int64_t>(waiting_->size() + held_.size() + running_.size() +
                                swapped_->size()) +
           receiving_ + handing_off_ + loading_;
  }

  // Async scheduling: a request admitted at `at` while the step it cannot join any more runs. It
  // waits outside the waiting queue (phase kWaiting) until the plan whose schedule() comes at or
  // after `at` (release_held), as vLLM's engine adds a request only before a schedule() call.
  void hold(RequestState& r, SimTime at);
  // Moves the held requests admitted at or before `cutoff` into the waiting queue, in order.
  void release_held(SimTime cutoff);
  bool has_held() const { return !held_.empty(); }
  // Async scheduling: a preempted decode's newest full block is not cached (preempt()).
  void set_async(bool on) { async_ = on; }
  // Async scheduling with speculation (run_queues_speculative.cc): the decodes of `it` among
  // `finishing` (requests the step just ended finished, which the plan scheduled as vLLM's does)
  // leave it for it.finished_in_flight, their shape only: they finish before the step runs.
  void detach_finished(IterationPlan& it, const std::vector<int64_t>& finishing);
  // KVSIM_CHECK: running requests are in flight as running and hold KV; waiting ones hold none.
  // Requires: running requests settled (no window open).
  void check() const;

 private:
  std::unordered_map<int64_t, RequestState>& requests_;
  GpuMemoryPool& pool_;
  KvLedger& ledger_;
  Recorder& recorder_;
  EngineConfig::Preemption preemption_;
  int64_t swap_space_bytes_;
  // KV space allocated up front (paged blocks, a contiguous arena): a shortage there means wait
  // or preempt. KV through the caching allocator is a live cudaMalloc: a shortage is an OOM.
  bool preallocated_;
  Hooks hooks_;

  std::unique_ptr<RequestQueue> waiting_;         // by the scheduling policy; never null
  std::deque<std::pair<SimTime, int64_t>> held_;  // (admitted at, id), in admission order
  std::vector<RequestState*> running_;
  std::unique_ptr<RequestQueue> swapped_;  // by the same policy; never null
  int64_t swap_used_bytes_ = 0;
  int64_t receiving_ = 0;    // kReceiving requests (decode side)
  int64_t handing_off_ = 0;  // kHandingOff requests (prefill side)
  int64_t loading_ = 0;      // kLoading requests (KV offloading)
  // KV offloading: the waiting head `r` (GPU prefix hit `cached`, of `target` tokens) starts
  // loading `hit` more from the CPU tier if its KV fits now. kStarted: it left the queue;
  // kWait: no room yet (the queue waits, FCFS); kNever: an empty pool cannot hold it.
  // kNone: no load (no tier, already loaded, or no hit past the GPU's).
  enum class LoadStart { kNone, kStarted, kWait, kNever };
  // The load, if any, of the waiting head `r` before its prefill (kNever: it was rejected).
  LoadStart offload_first(RequestState& r, const PrefixHashes& prefix, int64_t cached,
                          int64_t target, bool nothing_else);
  // The prefix figures of `r`'s lookup: `cached` of `target` tokens on the GPU, `hit` more in the
  // CPU tier; once per request, at its first admission or load.
  void count_lookup(RequestState& r, int64_t target, int64_t cached, int64_t hit);
  LoadStart start_load(RequestState& r, const PrefixHashes& prefix, int64_t cached, int64_t hit,
                       int64_t target, bool nothing_else);
  std::vector<RequestState*> order_scratch_;  // running_ as it was when a walk started
  // Whether the running prefill `r`'s next chunk within `budget` needs more blocks than are free
  // (a paged store; asked without a call that changes anything).
  bool stalled(const RequestState& r, int64_t budget, int64_t extra_free = 0) const;
  // Free paged blocks the admission gate of vLLM's scheduler_reserve_full_isl asks for a waiting
  // request whose whole sequence is `target` tokens described by `prefix`.
  int64_t full_sequence_blocks(const PrefixHashes& prefix, int64_t target,
                               const BatchLimits& limits) const;
  // Async scheduling: uncaches what vLLM had not cached yet of the decode `r` being preempted.
  void uncache_in_flight(RequestState& r);
  // Paged blocks a sequence holding `cached` tokens (whole blocks) takes for `chunk` more.
  int64_t new_blocks(int64_t cached, int64_t chunk) const;
  // Puts r at the end of the running batch (its next run_seq).
  void enter_running(RequestState& r) {
    r.run_seq = next_run_seq_++;
    running_.push_back(&r);
  }
  int64_t next_run_seq_ = 0;
  // Speculative decoding (run_queues_speculative.cc): r's decode in the plan `it` gets its
  // drafts (r.spec_drafts) within the token budget the plan's decodes left, and `target` the
  // tokens its KV must reach (its drafts' and the lookahead's slots too). False when no budget is
  // left. Only with spec_k_ > 0 (otherwise a decode takes one token: prompt + generated).
  bool speculate(RequestState& r, const IterationPlan& it, int64_t& target) const;
  // The same within `budget` tokens, its 1 + drafts also cut to `threshold` (> 0:
  // long_prefill_token_threshold, which vLLM's running loop applies to every running request's
  // new tokens, a decode's drafts included): for walk_running.
  bool speculate_within(RequestState& r, int64_t budget, int64_t threshold, int64_t& target) const;
  // Whether the decode `r` is scheduled this step with speculation. Under async scheduling vLLM
  // plans before the step just ended has given its output: it skips r only when the tokens
  // known before that step and the one token it surely gave reach the output length, and
  // schedules it otherwise, even when that step's accepted drafts finished it.
  bool spec_due(const RequestState& r) const;

  // The KV slots a running prefill's next chunk takes when its KV reaches `tokens`: with
  // speculation vLLM also allocates the lookahead for a running request's chunk (not for a
  // waiting request's first one), at most max_model_len.
  int64_t prefill_slots(int64_t tokens) const {
    if (spec_lookahead_ == 0) return tokens;
    return max_model_len_ > 0 ? std::min(tokens + spec_lookahead_, max_model_len_)
                              : tokens + spec_lookahead_;
  }
  int64_t spec_k_ = 0;          // num_speculative_tokens
  int64_t spec_lookahead_ = 0;  // vLLM's num_lookahead_tokens
  int64_t max_model_len_ = 0;
  int64_t max_batched_tokens_ = 0;
  bool async_ = false;
  std::unique_ptr<DecodeSet> decodes_;  // never null
  DecodeGain decode_gain_;
};

}  // namespace kvsim
