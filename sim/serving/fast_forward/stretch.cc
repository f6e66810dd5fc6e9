// FastForward::run: the decode-only stretch in closed form (docs/fast-forward.md).
//
// While every running request decodes (or prefills but stays stalled: its next chunk's blocks are
// not free), nothing can be admitted and no event is due, each iteration is the same plan: every
// decoding request grows by one token, the step takes latency(n, C) with C the batch's context
// sum, and the memory state is recorded at its start and end. The decode aggregate
// (lazy_decodes.h) already makes such a plan cost work only for the requests due at the ledger
// (a block boundary); here the step also skips the event queue, the admission pass and the
// planner, and runs as a loop.
//
// Each step is made as stepping makes it: its plan by the decoding set's walk
// (AggregateDecodes::grow_due, RunQueues::grow_decodes' own), its start and end by the replica's
// step functions (record_start, hand_over, close_iteration, complete), its tokens by
// RunQueues::commit_decodes, end_iteration's call.
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
// Quiet runs (quiet()): the steps before the next one that has anything of its own
// (a member due, the completing step, a possible shortage, activations beyond the cache, the
// step in flight) are the same plan with nothing but the batch's growth in it; they are planned
// in one pass and recorded at once (Recorder::on_decode_run), their states described by a start
// and how a step and a crossing move it, never made. The recorder's sums are exact integers, so
// the figures are the ones the steps' own calls leave (tests/metrics/decode_run_record_test.cc).
#include <algorithm>
#include <memory>
#include <span>

#include "core/check.h"
#include "sim/serving/fast_forward/fast_forward.h"

#include "sim/engine/event_queue.h"
#include "sim/engine/periodic_event.h"
#include "sim/metrics/recorder.h"
#include "sim/serving/fast_forward/aggregate_decodes.h"
#include "sim/serving/run_queues.h"

namespace kvsim {

FastForward::FastForward(Host& host) : host_(host), parts_(host.stretch_parts()) {
  auto aggregate = std::make_unique<AggregateDecodes>(parts_.queues, parts_.ledger, parts_.pool);
  aggregate_ = aggregate.get();
  parts_.queues.set_decodes(std::move(aggregate));
}

FastForward::~FastForward() = default;

void FastForward::run() {
  while (stretch()) {
  }
}

bool FastForward::stretch() {
  // The aggregate is on exactly when fast-forward may run: not in checking mode, without an
  // observer of every iteration (a timeline wants every step as its own slice) or a clock. (A
  // request observer keeps it: a member's only event in a stretch, its completion, goes through
  // finish_request as when stepping.)
  if (aggregate_ == nullptr || !host_.stretch_may_start()) return false;
  const SimTime t0 = parts_.events.now();
  SimTime horizon = parts_.events.next_time();  // moves on when a quiet run takes samples in line
  if (horizon <= t0) return false;  // something else happens now: the next iteration must see it
  // Async scheduling: arrivals held for the next plan (replica_async.cc); that plan runs as an
  // ordinary iteration.
  if (parts_.queues.has_swapped() || parts_.queues.has_held()) return false;
  LazyDecodes& lazy = aggregate_->lazy();
  const int64_t n = lazy.size();
  if (n == 0) return false;
  if (!admits_nothing(n, 0)) return false;
  const PagedBlocks& paged = *parts_.pool.kv().paged();
  const DecodeStepFixed step = host_.stretch_step(n, static_cast<int>(paged.block_tokens()));
  const bool windowed = growth_frees_blocks();
  const int64_t due_blocks = aggregate_->crossing_blocks();  // one a KV cache group
  std::vector<RequestState*>& due = due_members_;
  SimTime t = t0;
  bool stepped = false;
  while (true) {
    if (quiet(t, horizon, step) > 0) stepped = true;
    const bool completes = lazy.next_done() == lazy.step() + 1;
    const int64_t context = lazy.attended_sum();
    const SimTime duration = step.duration_ns(context);
    const SimTime end = t + duration;
    const bool in_flight = end >= horizon;  // an event comes before its end
    // The members due at the ledger and the crossers; each needs at most one new block a group
    // (it holds every token up to the last step's).
    // Blocks freed so far as they left sliding windows, and this step's swaps (each a block
    // freed and one taken: free blocks do not grow).
    const int64_t window_freed = windowed ? paged.window_freed_blocks() + lazy.swappers() : 0;
    lazy.take_due(due);
    if ((windowed && !due_frees_keep_blocked(due)) ||
        (static_cast<int64_t>(due.size()) + lazy.crossers()) * due_blocks > paged.free_blocks() ||
        !parts_.pool.reserve_activations(std::span<const BatchChunk>{}, n, context)) {
      lazy.restore_due(due);
      break;  // this step runs as an ordinary iteration
    }
    plan_.clear();
    const bool planned = aggregate_->grow_due(plan_, due);
    KVSIM_CHECK(planned && plan_.decode_seqs == n,
                "fast-forward: a decode step preempted or failed after its blocks were counted");
    const MemorySnapshot start = parts_.pool.snapshot();
    // start_iteration's record of a decode step.
    host_.stretch_record_start(t, start, n, n, duration, step.flops_fixed(context));
    if (in_flight) {
      // start_iteration's hand-over: end_iteration commits it when its end event runs.
      if (t > t0) parts_.events.advance_to(t);
      host_.stretch_hand_over(plan_, duration);
      return false;
    }
    // The iteration's end, as end_iteration's.
    host_.stretch_step_started(t);  // (async scheduling: the next plan's cutoff)
    t = end;
    host_.stretch_close_iteration();
    done_.clear();
    if (completes) {
      // end_iteration's order: the step is counted, its requests finish at its end (after the
      // next plan, an ordinary iteration, under async scheduling), then the state is recorded.
      parts_.events.advance_to(t);
      parts_.queues.commit_decodes(plan_, done_);
      KVSIM_CHECK(!done_.empty(), "fast-forward: the completing step completed nothing");
      host_.stretch_complete(done_);
      parts_.recorder.on_state(t, parts_.pool.snapshot());
      return !host_.plans_ahead();  // a new stretch may follow
    }
    parts_.recorder.on_activations_released(t, start);  // on_state(t, pool.snapshot())
    parts_.queues.commit_decodes(plan_, done_);
    KVSIM_CHECK(done_.empty(), "fast-forward: a request completed inside a stretch");
    stepped = true;
    if (windowed && paged.window_freed_blocks() != window_freed && !admits_nothing(n, 0)) {
      // A growth freed blocks that left a sliding window (after the admissions, in vllm_v0's
      // plans), and what was not admissible is now (asked as a new stretch asks; while nothing
      // is, the stretch goes on). The next iteration decides, as stepping's would.
      parts_.events.advance_to(t);
      return true;
    }
  }
  if (stepped) parts_.events.advance_to(t);
  return false;
}

bool FastForward::growth_frees_blocks() const {
  return parts_.pool.model().sliding_window.has_value() || parts_.pool.model().hybrid();
}

bool FastForward::due_frees_keep_blocked(const std::vector<RequestState*>& due) const {
  // With a sliding window a due member's growth may free blocks that left its window. A plan
  // that walks the decodes before admitting (continuous) admits with them free: the stretch's
  // premise must hold with them too, or the step runs as an ordinary iteration. (vllm_v0 admits
  // first; static admits nothing in a batch: their schedulers do not count them.)
  if (due.empty() || !growth_frees_blocks()) return true;
  const PagedBlocks& paged = *parts_.pool.kv().paged();
  const LazyDecodes& lazy = aggregate_->lazy();
  int64_t frees = 0;
  for (const RequestState* r : due) {
    // Its target at this plan: its context, caught up to now.
    frees += paged.window_frees(r->spec.id, r->context_tokens() + lazy.step() - r->lazy_sync);
  }
  return frees == 0 || admits_nothing(lazy.size(), frees);
}

namespace {

// The queues as a scheduler sees them when it is asked about a stretch: with the replica's
// guards, and unsure (blocked: false) about blocks a walk frees when prefix caching is on.
class StretchQueueView final : public QueueView {
 public:
  StretchQueueView(const RunQueues& queues, bool guarded, bool prefix_caching)
      : q_(queues), guarded_(guarded), prefix_caching_(prefix_caching) {}
  bool prefills_blocked(const BatchLimits& limits, int64_t decoding,
                        int64_t walk_frees) const override {
    // Freed blocks keep their prefixes with prefix caching, which could make a head's hits grow.
    if (walk_frees > 0 && prefix_caching_) return false;
    return q_.prefills_blocked(limits, guarded_, decoding, walk_frees);
  }
  bool has_prefilling() const override { return q_.first_prefilling() != nullptr; }

 private:
  const RunQueues& q_;
  bool guarded_;
  bool prefix_caching_;
};

}  // namespace

bool FastForward::admits_nothing(int64_t decoding, int64_t walk_frees) const {
  // A stalled prefill stays stalled and waiting requests that cannot be admitted now stay so:
  // free blocks only shrink in a stretch, and the decode count (the token budget) is fixed. The
  // scheduler says whether its plans admit nothing then.
  const StretchQueueView view(parts_.queues, host_.guarded(),
                              parts_.pool.kv().paged()->prefix_caching());
  return host_.plans_admit_nothing(view, decoding, walk_frees);
}

int64_t FastForward::quiet(SimTime& t, SimTime& horizon, const DecodeStepFixed& step) {
  // Fewer steps than this cost less one by one than the run's set-up.
  constexpr int64_t kMinQuietSteps = 8;
  LazyDecodes& lazy = aggregate_->lazy();
  const int64_t g = lazy.step();
  // Steps g+1 .. g+limit: before the completing step, and (below) the first at which a member
  // may be due (both run one by one).
  // With a sliding window, also before the step at whose plan a member's context reaches it
  // (the attended tokens then grow by fewer a step).
  // A batch with a member event every few steps (a busy server's) ends here, before any set-up.
  const int64_t limit =
      lazy.steps_before_due(std::min(lazy.next_done() - g - 1, lazy.next_cap() - g));
  // The recorder takes a run's durations in non-decreasing order: a step that grows with its
  // context (any latency model's; a fit that came out falling steps one by one).
  if (limit < kMinQuietSteps || step.ns_b < 0) return 0;
  const DeferredGrowth* growth = parts_.pool.kv().deferred_growth();  // fast-forward needs one
  const std::optional<KvUsage> after_one = growth->usage_after(lazy.size(), 0);
  if (!after_one) return 0;
  const int64_t n = lazy.size();
  const int64_t context0 = lazy.attended_sum();      // the decode context: attended tokens
  const int64_t attending = lazy.attended_growth();  // and what each step adds to it
  const int64_t free = parts_.pool.kv().paged()->free_blocks() / aggregate_->crossing_blocks();
  // Activations are affine in the context (flash: constant); a step whose reservation would
  // need more than is cached changes the pool and runs one by one.
  const int64_t act0 = parts_.pool.decode_activation_bytes(n, context0);
  const int64_t act_step = parts_.pool.decode_activation_bytes(n, context0 + attending) - act0;
  const int64_t cached = parts_.pool.activation_cached_bytes();
  if (act0 > cached) return 0;
  // Samples in line: when the next event is a lone replica's pending timeseries sample, the run
  // may go on to the next other event, taking the samples that fall inside its steps as they
  // would fire (each sees the step then in flight: its start state, activations reserved).
  PeriodicEvent* const sampler = host_.stretch_sampler();
  const bool sampling = sampler != nullptr && horizon == sampler->next_at();
  const SimTime until = sampling ? parts_.events.next_time_besides(sampler->pending()) : horizon;
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
  lazy.crossed_in_period(crossed_in_period_, swapped_in_period_);
  run.crossed_in_period = crossed_in_period_;
  run.swapped_in_period = swapped_in_period_;
  run.plan_steps(most, until, free, run_ends_);
  run_samples_.clear();
  if (sampling && run.steps >= kMinQuietSteps) {
    const int64_t keep = run.samples_within(sampler->next_at(), sampler->period(), run_samples_);
    if (keep < run.steps) run.plan_steps(keep, until, free, run_ends_);
  }
  const int64_t k = run.steps;
  if (k < kMinQuietSteps || parts_.pool.decode_activation_bytes(
                                n, context0 + (k - 1) * attending) != act0 + (k - 1) * act_step) {
    return 0;
  }
  // Each step as the stretch's loop makes it: its plan grows the batch by n tokens (its
  // crossers' in new blocks, its swappers' too, each freeing its oldest), its start is recorded
  // with the activations reserved, its end with them released. The states are affine in the
  // step and the blocks crossed and swapped: a start, and moves.
  const MemorySnapshot start0 = parts_.pool.snapshot_with(*after_one, act0);
  run.start0 = start0;
  run.per_step = snapshot_difference(
      parts_.pool.snapshot_with(*growth->usage_after(2 * n, 0), act0 + act_step), start0);
  run.per_crossing =
      snapshot_difference(parts_.pool.snapshot_with(*growth->usage_after(n, 1), act0), start0);
  if (run.swaps()) {  // else swapped(j) = 0 throughout: the move is never taken
    run.per_swap =
        snapshot_difference(parts_.pool.snapshot_with(*growth->usage_after(n, 0, 1), act0), start0);
  }
  run.end_delta = snapshot_difference(parts_.pool.snapshot_with(*after_one, 0), start0);
  // Σ flops(context0 + j attending) over j < k, exact.
  run.flops = k * step.flops_a + step.flops_b * (static_cast<Int128>(k) * context0 +
                                                 static_cast<Int128>(attending) * k * (k - 1) / 2);
  parts_.recorder.on_decode_run(run);
  if (!run_samples_.empty()) {
    for (const auto& [at, j] : run_samples_) host_.stretch_sample_at(at, run.start_state(j));
    sampler->took_through(run_samples_.back().first);
    horizon = parts_.events.next_time();
  }
  const int64_t blocks = run.crossed_total, swaps = run.swapped_total;
  // What the steps' plans gave the ledger (end_walk's crossings and deferrals, summed) and what
  // their commits count.
  parts_.ledger.add_crossings(blocks);
  parts_.ledger.add_swaps(swaps);
  parts_.ledger.defer_many(n * k - blocks - swaps);
  parts_.ledger.report();
  lazy.advance(k);
  t += static_cast<SimTime>(run.d_sum);
  return k;
}

}  // namespace kvsim
