// Replica's iterations: planning one (plan), timing and launching it (start_iteration), and
// ending it (end_iteration: tokens, completions, then the fast-forward and the next kick).
// Arrivals, finishes, OOMs and restarts: replica.cc.
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "models/memory/kv_capabilities.h"
#include "sim/serving/fast_forward/fast_forward.h"
#include "sim/serving/offload/offload_connector.h"
#include "sim/serving/replica.h"

namespace kvsim {

namespace {

// What the observer is told about an iteration (only computed when there is an observer).
IterationShape iteration_shape(const IterationPlan& it, SimTime start, SimTime end) {
  IterationShape shape{.start = start,
                       .end = end,
                       .prefill_seqs = static_cast<int64_t>(it.prefill_ids.size()),
                       .decode_seqs = static_cast<int64_t>(it.decode.size())};
  for (int64_t chunk : it.prefill_chunks) shape.prefill_tokens += chunk;
  return shape;
}

}  // namespace

bool Replica::plan(bool* nothing) {
  IterationPlan& it = planning_;
  it.clear();
  while (true) {
    if (!scheduler_->plan(it, limits_, queues_)) return false;  // an OOM ended the plan
    if (!it.empty()) return true;
    if (nothing != nullptr) {
      *nothing = true;
      return false;
    }
    if (!queues_.has_running() && !queues_.has_swapped()) {
      // The step preempted every running request (the last one itself) and so admitted nothing;
      // vLLM's engine loop steps on while requests wait, and its next schedule() takes the
      // waiting queue again. Otherwise the replica is idle, or waits for an arrival.
      if (it.preempted > 0 && queues_.waiting_size() > 0) {
        it.clear();
        continue;
      }
      return false;
    }
    // Nothing can run although requests hold memory: they wait on each other. Swapped requests
    // come back as recomputes; otherwise the scheduling policy's victim (the newest running
    // request under fcfs) yields its memory (preemption) or, with preemption off, the server is
    // out of memory.
    if (!queues_.has_running()) {
      // KV held for transfers into this replica frees up or runs when they end: wait for them.
      if (queues_.receiving() > 0) return false;
      queues_.unswap_oldest();
    } else if (queues_.can_preempt() && queues_.running_size() > 1) {
      queues_.preempt(*queues_.preemption_victim(), it);
    } else {
      oom(queues_.running().back()->spec.id, AllocResult::failure(OomReason::kCapacity, 0, 0, 0));
      return false;
    }
    it.clear();
  }
}

void Replica::start_iteration() {
  if (prepare_iteration()) launch_iteration(prepared_duration_);
}

bool Replica::prepare_iteration() {
  run_admission();
  if (v0_output_ && !v0_finished_.empty()) {
    // vLLM V0 schedules before it processes the last step's outputs: the finished requests
    // still run and hold their blocks. A schedule that takes nothing drains the outputs at once.
    bool nothing = false;
    if (!plan(&nothing)) {
      v0_drain();
      if (!nothing || !plan()) return false;
    }
  } else if (!(async_ ? plan_ahead() : plan())) {
    if (v0_output_) v0_drain();
    return false;
  }
  const IterationPlan& it = planning_;
  BatchShape& shape = shape_scratch_;
  shape.prefill.clear();
  shape.decode.clear();
  const PagedBlocks* paged = pool_.kv().paged();
  shape.block_tokens = paged != nullptr ? static_cast<int>(paged->block_tokens()) : 0;
  std::vector<BatchChunk>& chunks = chunk_scratch_;
  chunks.clear();
  for (size_t i = 0; i < it.prefill_ids.size(); ++i) {
    const RequestState& r = requests_.at(it.prefill_ids[i]);
    const int64_t chunk = it.prefill_chunks[i];
    shape.prefill.push_back({.tokens = chunk,
                             .context_tokens = r.prefilled,
                             .emits_token = r.prefilled + chunk >= r.prefill_target});
    chunks.push_back({.query_tokens = chunk, .context_tokens = r.prefilled + chunk});
  }
  // Decode sequences enter the latency and activation models through their count and context
  // sum only (exact integer sums; see BatchShape): no per-sequence entries.
  int64_t decode_context = it.decode_context;
  shape.decode_seqs = it.decode_seqs;
  // Speculative decoding: decodes with drafts are verified as queries of 1 + drafts tokens.
  if (spec_) {
    spec_->verification_shape(it, pool_.model(), shape, chunks);
    decode_context = shape.decode_context_tokens;
  }
  if (check_) {
    // The activation reserve was profiled for max_num_batched_tokens: with the model limits
    // resolved (max_model_len <= the budget when unchunked), no chunk may exceed it.
    if (config_.max_model_len > 0) {
      for (size_t i = 0; i < it.prefill_ids.size(); ++i) {
        KVSIM_CHECK(it.prefill_chunks[i] <= limits_.max_num_batched_tokens,
                    "request {}'s prefill chunk of {} tokens exceeds max_num_batched_tokens {}",
                    it.prefill_ids[i], it.prefill_chunks[i], limits_.max_num_batched_tokens);
      }
    }
    int64_t sum = 0;
    for (const RequestState* r : it.decode)
      sum += pool_.model().attended_tokens(r->context_tokens());
    KVSIM_CHECK(sum == it.decode_context, "decode context {} != tracked {}", sum,
                it.decode_context);
  }
  shape.decode_context_tokens = decode_context;
  if (AllocResult a = pool_.reserve_activations(chunks, shape.decode_seqs, decode_context); !a) {
    oom(it.prefill_ids.empty() ? queues_.last_decoding()->spec.id : it.prefill_ids.back(), a);
    return false;
  }
  ledger_.report();
  if (check_) {
    // The checks compare the store's per-request figures with its totals: settle first.
    for (RequestState* r : queues_.running()) ledger_.settle(*r);
    check();
  }
  // (Nothing below changes the pool or the recorder before record_start.)
  SimTime duration = 0;
  Int128 flops = 0;
  if (shape.prefill.empty() && shape.decode_seqs > 0 && clock_ == nullptr &&
      it.extra_seconds == 0 && !spec_) {
    // A decode-only step: the latency model's exact integer form, which the fast-forward's
    // stretches also use (sim/serving/fast_forward/stretch.cc).
    const DecodeStepFixed f = decode_step_fixed(shape.decode_seqs, shape.block_tokens);
    duration = f.duration_ns(decode_context);
    flops = f.flops_fixed(decode_context);
  } else {
    const IterationCost cost = latency_.iteration(shape, OpDetail::kTotals);
    // A clock replaces the model's seconds only; the flops and the swap traffic stay modeled.
    const double seconds = clock_ != nullptr ? clock_seconds(it, shape, cost) : cost.seconds;
    // The drafter runs in the same step, after the target's pass (modelled time only).
    const double draft = spec_ && clock_ == nullptr ? spec_->draft_seconds(shape) : 0;
    duration = std::max<SimTime>(1, seconds_to_sim(seconds + draft + it.extra_seconds));
    if (config_.step_time && clock_ == nullptr) {
      int64_t tokens = it.decode_seqs + it.spec_tokens + it.finished_tokens();
      for (const int64_t c : it.prefill_chunks) tokens += c;
      const int64_t seqs =
          static_cast<int64_t>(it.prefill_ids.size() + it.finished_in_flight.size()) +
          it.decode_seqs;
      duration = config_.step_time->duration(tokens, seqs) + seconds_to_sim(it.extra_seconds);
    }
    flops = flops_to_fixed(cost.flops);
  }
  if (v0_output_) duration = v0_outputs_processed(duration);
  prepared_duration_ = duration;
  prepared_flops_ = flops;
  return true;
}

void Replica::launch_iteration(SimTime duration) {
  const IterationPlan& it = planning_;
  int64_t seqs = static_cast<int64_t>(it.prefill_ids.size()) + it.decode_seqs;
  int64_t tokens = it.decode_seqs;
  for (const int64_t c : it.prefill_chunks) tokens += c;
  if (spec_) {
    // The drafts verified; and under async scheduling, requests whose last token came with the
    // step before still run in this one (it.finished_in_flight): their rows and tokens count.
    seqs += static_cast<int64_t>(it.finished_in_flight.size());
    tokens += it.spec_tokens + it.finished_tokens();
  }
  record_start(events_.now(), pool_.snapshot(), seqs, tokens, duration, prepared_flops_);
  if (offload_) plan_offload_stores(it);
  hand_over(planning_, duration);
}

int64_t Replica::gated_tokens() const {
  const IterationPlan& it = planning_;
  int64_t tokens = it.decode_seqs + it.spec_tokens + it.finished_tokens();
  for (const int64_t c : it.prefill_chunks) tokens += c;
  return tokens;
}

SimTime Replica::lockstep_time(int64_t to_tokens, int64_t group_tokens) const {
  const int64_t pad = std::max<int64_t>(0, to_tokens - gated_tokens());
  if (config_.step_time) return prepared_duration_ + config_.step_time->per_token_ns * pad;
  BatchShape padded = shape_scratch_;
  padded.decode_seqs += pad;
  padded.decode_context_tokens += pad;
  padded.moe_group_tokens = group_tokens;
  const double change = latency_.iteration(padded, OpDetail::kTotals).seconds -
                        latency_.iteration(shape_scratch_, OpDetail::kTotals).seconds;
  return std::max<SimTime>(1, prepared_duration_ + seconds_to_sim(change));
}

SimTime Replica::dummy_time(int64_t to_tokens, int64_t group_tokens) const {
  // vLLM's execute_dummy_batch: a forward of one decode token (uniform decode), padded like a
  // real batch to the group's token count.
  const int64_t tokens = std::max<int64_t>(1, to_tokens);
  if (config_.step_time) return config_.step_time->duration(tokens, 1);
  BatchShape dummy;
  const PagedBlocks* paged = pool_.kv().paged();
  dummy.block_tokens = paged != nullptr ? static_cast<int>(paged->block_tokens()) : 0;
  dummy.decode_seqs = tokens;
  dummy.decode_context_tokens = tokens;
  dummy.moe_group_tokens = group_tokens;
  return std::max<SimTime>(1, seconds_to_sim(latency_.iteration(dummy, OpDetail::kTotals).seconds));
}

DecodeStepFixed Replica::decode_step_fixed(int64_t n, int block_tokens) const {
  const DecodeStepFixed modeled = latency_.decode_step_fixed(n, block_tokens);
  return config_.step_time ? config_.step_time->decode_step(modeled, n) : modeled;
}

double Replica::clock_seconds(const IterationPlan& it, const BatchShape& shape,
                              const IterationCost& cost) {
  ClockBatch& b = clock_batch_;
  b.prefill.clear();
  b.decode.clear();
  for (size_t i = 0; i < it.prefill_ids.size(); ++i) {
    const RequestState& r = requests_.at(it.prefill_ids[i]);
    const int64_t chunk = it.prefill_chunks[i];
    b.prefill.push_back({.request_id = r.spec.id,
                         .kv_before = r.prefilled,
                         .new_tokens = chunk,
                         .emits_token = r.prefilled + chunk >= r.prefill_target});
  }
  // A decoding sequence's KV lacks its last token (generated last iteration): this step
  // computes that token's KV and attends to all context_tokens().
  for (const RequestState* r : it.decode) {
    b.decode.push_back({.request_id = r->spec.id,
                        .kv_before = r->context_tokens() - 1,
                        .new_tokens = 1 + r->spec_drafts,
                        .emits_token = true});
  }
  for (const IterationPlan::Finished& f : it.finished_in_flight) {
    b.decode.push_back({.request_id = f.id,
                        .kv_before = f.kv_before,
                        .new_tokens = f.tokens,
                        .emits_token = true});
  }
  b.start_s = sim_to_seconds(events_.now());
  b.shape = &shape;
  b.modeled = &cost;
  const double s = clock_->seconds(b);
  KVSIM_CHECK(s > 0 && std::isfinite(s), "the iteration clock returned {} s", s);
  return s;
}

void Replica::end_iteration() {
  const IterationPlan& it = in_flight_;
  busy_ = false;
  close_iteration(false);
  if (offload_) offload_->forward_ended();
  const SimTime now = events_.now();
  if (v0_output_) v0_release_processed();  // the step before's, processed during this one
  std::vector<int64_t>& done = done_scratch_;
  done.clear();
  // The decodes' step is counted first, so that a request whose prefill ends here joins the
  // decode aggregate after it (its first decode step is the next one).
  std::vector<int64_t>& decode_done = decode_done_scratch_;
  decode_done.clear();
  if (spec_) spec_->begin_step_end(requests_);
  queues_.commit_decodes(it, decode_done);
  for (size_t i = 0; i < it.prefill_ids.size(); ++i) {
    auto f = requests_.find(it.prefill_ids[i]);
    if (f == requests_.end() || f->second.phase != Phase::kRunning) continue;
    RequestState& r = f->second;
    r.prefilled += it.prefill_chunks[i];
    observe(RequestEventKind::kPrefillChunk, r, {}, it.prefill_chunks[i]);
    if (r.prefilled < r.prefill_target) continue;
    ++r.generated;  // the prefill's token; decoding() from now on
    if (spec_) spec_->prefill_gained(r);
    if (v0_output_) {
      v0_token_made(r);
    } else if (r.first_token_at < 0) {
      r.first_token_at = now;
    }
    const bool finished = r.generated >= r.spec.output_tokens;
    if (finished) done.push_back(r.spec.id);
    queues_.prefilled(r, finished);
  }
  done.insert(done.end(), decode_done.begin(), decode_done.end());  // in running order
  complete(done);
  if (v0_output_) v0_seqs_ = static_cast<int64_t>(it.prefill_ids.size()) + it.decode_seqs;
  plan_after_end_ = async_;
  recorder_.on_state(now, pool_.snapshot());
  if (observer_)
    observer_->on_iteration(iteration_shape(it, iteration_start_, now), observed_state());
  if (fast_forward_ != nullptr) fast_forward_->run();
  kick();
}

}  // namespace kvsim
