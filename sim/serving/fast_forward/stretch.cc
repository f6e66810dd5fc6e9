// Replica::fast_forward: the decode-only stretch in closed form (docs/architecture.md,
// "Fast-forward").
//
// While every running request decodes (or prefills but stays stalled: its next chunk's blocks are
// not free), nothing can be admitted and no event is due, each iteration is the same plan: every
// decoding request grows by one token, the step takes latency(n, C) with C the batch's context
// sum, and the memory state is recorded at its start and end. The decode aggregate
// (lazy_decodes.h) already makes such a plan cost work only for the requests due at the ledger
// (a block boundary); here the step also skips the event queue, the admission pass and the
// planner, and runs as a loop.
//
// The stretch stops before the first step that is not such a plan, which then runs as an
// ordinary iteration: a step whose new blocks might not all be free (it may preempt); a step
// whose activations do not fit (it OOMs). The first step that would end at or after the next
// pending event (an arrival, a timeout, a sample, another replica's iteration: whatever it does
// must see the in-flight state it sees when stepping) is planned here and then handed to the
// event queue as the iteration in flight, with its end event, exactly as start_iteration leaves
// one (its plan is start_iteration's: nothing was due between). A step
// at whose end requests complete is the stretch's last: they finish at its end as end_iteration
// finishes them, and a new stretch may start from there (blocks were freed: admission decides).
//
// Identity with stepping (engine.fast_forward: false): every call that changes state or records
// it is made with the same arguments in the same order, except that the aggregate deferred tokens
// of a step go to the ledger in one sum (the store's totals are sums: its figures after the step's
// report() are the same), and the activation reservation, which no KV call affects on a
// preallocated store, is tried before the step's KV calls so that a failed one changes nothing.
// Step times come from the same integer function of the same shape (DecodeStepFixed), added to
// the clock one by one as the events would.
//
// Quiet runs (fast_forward_quiet): the steps before the next one that has anything of its own
// (a member due, the completing step, a possible shortage, activations beyond the cache, the
// step in flight) are the same plan with nothing but the batch's growth in it; they are planned
// in one pass and recorded at once (Recorder::on_decode_run), their states described by a start
// and how a step and a crossing move it, never made. The recorder's sums are exact integers, so
// the figures are the ones the steps' own calls leave (tests/engine/decode_run_record_test.cc).
#include <algorithm>
#include <memory>
#include <span>

#include "core/check.h"
#include "sim/serving/fast_forward/aggregate_decodes.h"
#include "sim/serving/replica.h"

namespace kvsim {

void Replica::update_fast_forward() {
  const bool on = fast_forward_ok_ && !check_ &&
                  (observer_ == nullptr || !observer_->needs_every_iteration());
  if (on == (aggregate_ != nullptr)) return;
  std::unique_ptr<AggregateDecodes> aggregate =
      on ? std::make_unique<AggregateDecodes>(queues_, ledger_, pool_) : nullptr;
  aggregate_ = aggregate.get();
  queues_.set_decodes(std::move(aggregate));  // (nullptr: stepping's)
}

void Replica::fast_forward() {
  while (fast_forward_stretch()) {
  }
}

bool Replica::fast_forward_stretch() {
  // The aggregate is on exactly when fast-forward may run: not in checking mode, without an
  // observer of every iteration (a timeline wants every step as its own slice) or a clock. (A
  // request observer keeps it: a member's only event in a stretch, its completion, goes through
  // finish_request as when stepping.)
  if (aggregate_ == nullptr || busy_ || down_ || kick_pending_) return false;
  const SimTime t0 = events_.now();
  SimTime horizon = events_.next_time();  // moves on when a quiet run takes samples in line
  if (horizon <= t0) return false;  // something else happens now: the next iteration must see it
  if (admission_.size() != 0 || queues_.has_swapped()) return false;
  // Async scheduling: requests that finished wait for the next plan, arrivals for theirs
  // (replica_async.cc); that plan runs as an ordinary iteration.
  if (!finishing_.empty() || queues_.has_held()) return false;
  LazyDecodes& lazy = aggregate_->lazy();
  const int64_t n = lazy.size();
  if (n == 0) return false;
  if (!stretch_admits_nothing(n, 0)) return false;
  const PagedBlocks& paged = *pool_.kv().paged();

  const DecodeStepFixed step = decode_step_fixed(n, static_cast<int>(paged.block_tokens()));
  const bool windowed = pool_.model().sliding_window.has_value();  // growth may free blocks
  std::vector<RequestState*>& due = ff_due_members_;
  SimTime t = t0;
  bool stepped = false;
  while (true) {
    if (fast_forward_quiet(t, horizon, step) > 0) stepped = true;
    const bool completes = lazy.next_done() == lazy.step() + 1;
    const int64_t context = lazy.attended_sum();
    const SimTime duration = step.duration_ns(context);
    const SimTime end = t + duration;
    const bool in_flight = end >= horizon;  // an event comes before its end
    // The members due at the ledger; each needs at most one new block (it holds every token up
    // to the last step's).
    // Blocks freed so far as they left sliding windows, and this step's swaps (each a block
    // freed and one taken: free blocks do not grow).
    const int64_t window_freed = windowed ? paged.window_freed_blocks() + lazy.swappers() : 0;
    lazy.take_due(due);
    if ((windowed && !due_frees_keep_blocked(due)) ||
        static_cast<int64_t>(due.size()) + lazy.crossers() > paged.free_blocks() ||
        !pool_.reserve_activations(std::span<const BatchChunk>{}, n, context)) {
      lazy.restore_due(due);
      break;  // this step runs as an ordinary iteration
    }
    ff_plan_.clear();
    const bool planned = aggregate_->grow_due(ff_plan_, due);
    KVSIM_CHECK(planned && ff_plan_.decode_seqs == n,
                "fast-forward: a decode step preempted or failed after its blocks were counted");
    const MemorySnapshot start = pool_.snapshot();
    // start_iteration's record of a decode step.
    record_start(t, start, n, n, duration, step.flops_fixed(context));
    if (in_flight) {
      // start_iteration's hand-over: end_iteration commits it when its end event runs.
      if (t > t0) events_.advance_to(t);
      hand_over(ff_plan_, duration);
      return false;
    }
    // The iteration's end, as end_iteration's.
    iteration_start_ = t;  // (async scheduling: the next plan's cutoff)
    t = end;
    close_iteration(true);
    done_scratch_.clear();
    if (completes) {
      // end_iteration's order: the step is counted, its requests finish at its end (after the
      // next plan, an ordinary iteration, under async scheduling), then the state is recorded.
      events_.advance_to(t);
      queues_.commit_decodes(ff_plan_, done_scratch_);
      KVSIM_CHECK(!done_scratch_.empty(), "fast-forward: the completing step completed nothing");
      complete(done_scratch_);
      recorder_.on_state(t, pool_.snapshot());
      return !async_;  // a new stretch may follow
    }
    recorder_.on_activations_released(t, start);  // on_state(t, pool_.snapshot())
    queues_.commit_decodes(ff_plan_, done_scratch_);
    KVSIM_CHECK(done_scratch_.empty(), "fast-forward: a request completed inside a stretch");
    stepped = true;
    if (windowed && paged.window_freed_blocks() != window_freed) {
      // A member's growth freed blocks that left its sliding window (after the admissions, in
      // vllm_v0's plans): free blocks grew, so what was not admissible may be now
      // (stretch_admits_nothing's premise). The next iteration decides, as stepping's would.
      events_.advance_to(t);
      return true;
    }
  }
  if (stepped) events_.advance_to(t);
  return false;
}

bool Replica::due_frees_keep_blocked(const std::vector<RequestState*>& due) const {
  // With a sliding window a due member's growth may free blocks that left its window. A plan
  // that walks the decodes before admitting (continuous) admits with them free: the stretch's
  // premise must hold with them too, or the step runs as an ordinary iteration. (vllm_v0 admits
  // first; static admits nothing in a batch: their schedulers do not count them.)
  if (due.empty() || !pool_.model().sliding_window) return true;
  const PagedBlocks& paged = *pool_.kv().paged();
  const LazyDecodes& lazy = aggregate_->lazy();
  int64_t frees = 0;
  for (const RequestState* r : due) {
    // Its target at this plan: its context, caught up to now.
    frees += paged.window_frees(r->spec.id, r->context_tokens() + lazy.step() - r->lazy_sync);
  }
  return frees == 0 || stretch_admits_nothing(lazy.size(), frees);
}

namespace {

// The queues as a scheduler sees them when it is asked about a stretch: with the replica's
// guards, and unsure (blocked: false) about blocks a walk frees when prefix caching is on.
class StretchQueueView final : public QueueView {
 public:
  StretchQueueView(const RunQueues& queues, bool guarded, bool prefix_caching)
      : queues_(queues), guarded_(guarded), prefix_caching_(prefix_caching) {}
  bool prefills_blocked(const BatchLimits& limits, int64_t decoding, int64_t walk_frees) const override {
    // Freed blocks keep their prefixes with prefix caching, which could make a head's hits grow.
    if (walk_frees > 0 && prefix_caching_) return false;
    return queues_.prefills_blocked(limits, guarded_, decoding, walk_frees);
  }
  bool has_prefilling() const override { return queues_.first_prefilling() != nullptr; }

 private:
  const RunQueues& queues_;
  bool guarded_;
  bool prefix_caching_;
};

}  // namespace

bool Replica::stretch_admits_nothing(int64_t decoding, int64_t walk_frees) const {
  // A stalled prefill stays stalled and waiting requests that cannot be admitted now stay so:
  // free blocks only shrink in a stretch, and the decode count (the token budget) is fixed. The
  // scheduler says whether its plans admit nothing then.
  const StretchQueueView view(queues_, admission_.has_guards(), pool_.kv().paged()->prefix_caching());
  return scheduler_->admits_nothing(view, limits_, decoding, walk_frees);
}

int64_t Replica::fast_forward_quiet(SimTime& t, SimTime& horizon, const DecodeStepFixed& step) {
  // Fewer steps than this cost less one by one than the run's set-up.
  constexpr int64_t kMinQuietSteps = 8;
  LazyDecodes& lazy = aggregate_->lazy();
  const int64_t g = lazy.step();
  // Steps g+1 .. g+limit: before the completing step, and (below) the first at which a member
  // may be due (both run one by one).
  // With a sliding window, also before the step at whose plan a member's context reaches it
  // (the attended tokens then grow by fewer a step).
  // A batch with a member event every few steps (a busy server's) ends here, before any set-up.
  const int64_t limit = lazy.steps_before_due(std::min(lazy.next_done() - g - 1, lazy.next_cap() - g));
  // The recorder takes a run's durations in non-decreasing order: a step that grows with its
  // context (any latency model's; a fit that came out falling steps one by one).
  if (limit < kMinQuietSteps || step.ns_b < 0) return 0;
  const DeferredGrowth* growth = pool_.kv().deferred_growth();  // fast-forward needs one
  const std::optional<KvUsage> after_one = growth->usage_after(lazy.size(), 0);
  if (!after_one) return 0;
  const int64_t n = lazy.size();
  const int64_t context0 = lazy.attended_sum();  // the decode context: attended tokens
  const int64_t attending = lazy.attended_growth();  // and what each step adds to it
  const int64_t free = pool_.kv().paged()->free_blocks();
  // Activations are affine in the context (flash: constant); a step whose reservation would
  // need more than is cached changes the pool and runs one by one.
  const int64_t act0 = pool_.decode_activation_bytes(n, context0);
  const int64_t act_step = pool_.decode_activation_bytes(n, context0 + attending) - act0;
  const int64_t cached = pool_.activation_cached_bytes();
  if (act0 > cached) return 0;
  // Samples in line: when the next event is a lone replica's pending timeseries sample, the run
  // may go on to the next other event, taking the samples that fall inside its steps as they
  // would fire (each sees the step then in flight: its start state, activations reserved).
  const bool sampling = sampler_ != nullptr && horizon == sampler_->next_at();
  const SimTime until = sampling ? events_.next_time_besides(sampler_->pending()) : horizon;
  // At most this many steps: none may be due (limit); each lasts at least the first's duration
  // and must end before `until`; each reserves act0 + j act_step <= cached; a bounded buffer.
  constexpr int64_t kMaxRunSteps = int64_t{1} << 16;
  DecodeRun run;
  run.t = t;
  run.seqs = n;
  run.duration = DecodeStepFixed::Walk(step, context0, attending);
  int64_t most = std::min({limit, (until - t - 1) / run.duration.ns_at(0), kMaxRunSteps});
  if (act_step > 0) most = std::min(most, (cached - act0) / act_step + 1);
  if (most < kMinQuietSteps) return 0;
  lazy.crossed_in_period(ff_crossed_in_period_, ff_swapped_in_period_);
  run.crossed_in_period = ff_crossed_in_period_;
  run.swapped_in_period = ff_swapped_in_period_;
  run.plan_steps(most, until, free, ff_run_ends_);
  ff_run_samples_.clear();
  if (sampling && run.steps >= kMinQuietSteps) {
    const int64_t keep = run.samples_within(sampler_->next_at(), sampler_->period(), ff_run_samples_);
    if (keep < run.steps) run.plan_steps(keep, until, free, ff_run_ends_);
  }
  const int64_t k = run.steps;
  if (k < kMinQuietSteps ||
      pool_.decode_activation_bytes(n, context0 + (k - 1) * attending) != act0 + (k - 1) * act_step) {
    return 0;
  }
  // Each step as the stretch's loop makes it: its plan grows the batch by n tokens (its
  // crossers' in new blocks, its swappers' too, each freeing its oldest), its start is recorded
  // with the activations reserved, its end with them released. The states are affine in the
  // step and the blocks crossed and swapped: a start, and moves.
  const MemorySnapshot start0 = pool_.snapshot_with(*after_one, act0);
  run.start0 = start0;
  run.per_step =
      snapshot_difference(pool_.snapshot_with(*growth->usage_after(2 * n, 0), act0 + act_step), start0);
  run.per_crossing = snapshot_difference(pool_.snapshot_with(*growth->usage_after(n, 1), act0), start0);
  if (run.swaps()) {  // else swapped(j) = 0 throughout: the move is never taken
    run.per_swap = snapshot_difference(pool_.snapshot_with(*growth->usage_after(n, 0, 1), act0), start0);
  }
  run.end_delta = snapshot_difference(pool_.snapshot_with(*after_one, 0), start0);
  // Σ flops(context0 + j attending) over j < k, exact.
  run.flops = k * step.flops_a + step.flops_b * (static_cast<Int128>(k) * context0 +
                                                 static_cast<Int128>(attending) * k * (k - 1) / 2);
  recorder_.on_decode_run(run);
  if (!ff_run_samples_.empty()) {
    for (const auto& [at, j] : ff_run_samples_) sample_at(at, run.start_state(j));
    sampler_->took_through(ff_run_samples_.back().first);
    horizon = events_.next_time();
  }
  const int64_t blocks = run.crossed_total, swaps = run.swapped_total;
  // What the steps' plans gave the ledger (end_walk's crossings and deferrals, summed) and what
  // their commits count.
  ledger_.add_crossings(blocks);
  ledger_.add_swaps(swaps);
  ledger_.defer_many(n * k - blocks - swaps);
  ledger_.report();
  lazy.advance(k);
  t += static_cast<SimTime>(run.d_sum);
  return k;
}

}  // namespace kvsim
