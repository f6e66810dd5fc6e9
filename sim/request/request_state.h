// A request as the replica sees it while it is in flight.
#pragma once

#include <cstdint>
#include <optional>

#include "core/sim_time.h"
#include "sim/engine/event_queue.h"
#include "sim/request/outcome.h"
#include "workloads/request_spec.h"

namespace kvsim {

enum class Phase {
  kGuardQueue,  // held by a guard (queue action), not yet admitted
  kWaiting,     // admitted, waiting for (re)prefill
  kRunning,     // in the running batch: prefilling (chunked) or decoding (see decoding())
  kSwapped,     // preempted by swap: KV in host memory (also a disaggregated request waiting
                // on its decode replica for room: see kv_transferred)
  // Disaggregated serving (docs/cluster.md), KV held outside the queues while it crosses the
  // link: on the prefill replica, its first token is out and its KV stays until the transfer
  // ends; on the decode replica, its KV is allocated and the transfer is under way.
  kHandingOff,
  kReceiving,
  // KV offloading (engine.kv_offloading): its KV is allocated and its prefix is loading from the
  // CPU tier (vLLM's WAITING_FOR_REMOTE_KVS); it is in no queue and is not scheduled meanwhile.
  kLoading,
  kDone,
};

// How far a decode-aggregate member's stored figures lag its true ones now (LazyDecodes::lag,
// through RunQueues::lag): tokens generated, and KV tokens gained by deferral, since its figures
// were last written out. Zero for a request outside the aggregate (always so when stepping).
struct AggregateLag {
  int64_t generated = 0;
  int64_t kv_tokens = 0;
};

struct RequestState {
  RequestSpec spec;
  int64_t prompt_tokens = 0;   // after any truncation
  int64_t generated = 0;       // output tokens produced so far
  int64_t prefilled = 0;       // tokens of the current (re)prefill whose KV is computed
                               // (starts at its prefix-cache hit)
  int64_t prefill_target = 0;  // tokens the current (re)prefill covers: prompt + generated
  int64_t swapped_tokens = 0;  // KV tokens held in host memory while swapped
  Phase phase = Phase::kGuardQueue;
  Outcome outcome = Outcome::kNone;
  bool truncated = false;
  // Disaggregated serving (docs/cluster.md): the prefill side runs it for its first token only
  // (its outcome is not the request's: the cluster totals skip it) and holds its KV until the
  // transfer ends; the decode side waits in the swapped queue until its KV fits, allocates it
  // (the transfer may start then) and decodes once the transfer ends.
  bool prefill_only = false;
  bool kv_transferred = false;
  // Async scheduling with speculation: the tokens it gained at the end of the step just ended
  // and the drafts that step verified (0, 0 when it gained nothing there): vLLM plans the next
  // step before that output, counting all the step's tokens as computed (placeholders). At most
  // num_speculative_tokens + 1 (65): 16 bits, in the padding after the flags above.
  int16_t spec_last_gain = 0;
  int16_t spec_last_drafts = 0;
  int64_t tokens_dropped = 0;  // prompt tokens cut by guards
  int preemptions = 0;
  // Speculative decoding: the draft tokens its decode in the planned step verifies (0: a plain
  // decode; set by RunQueues::grow_decodes, read at that step's end; at most 64).
  int32_t spec_drafts = 0;
  SimTime first_token_at = -1;
  SimTime finished_at = -1;
  SimTime queued_at = -1;  // when it reached the guard queue (its arrival)
  // The latency breakdown's phase changes (sim/metrics/breakdown.h; integer ns, so its parts
  // sum to E2E exactly): admitted past the guards, first entered the running batch, and the
  // time spent preempted (from a preemption to re-entering the running batch), split by whether
  // the first token had come yet. preempted_at: the pending preemption's start, -1 when none.
  SimTime admitted_at = -1;
  SimTime first_scheduled_at = -1;
  SimTime preempted_at = -1;
  SimTime preempted_before_first_token = 0;
  SimTime preempted_after_first_token = 0;
  // Two bounds on waiting, served by one pending event (`timeout`, at the earlier of the two that
  // apply; AdmissionQueue arms it): a queueing guard's timeout_s, while the request is in the
  // guard queue, and the request's max_queue_time deadline, until its first scheduling. -1: none.
  SimTime guard_expires_at = -1;
  SimTime deadline_at = -1;
  bool scheduled = false;       // admitted into the running batch at least once
  bool offload_loaded = false;  // its prefix was loaded from the CPU tier (kv_offloading)
  // Time spent loading its prefix from the tiers before its first scheduling (kv_offloading's
  // TTFT split), and the pending load's start (-1: none).
  SimTime loading_ns = 0;
  SimTime loading_since = -1;
  std::optional<EventId> timeout;  // the pending timeout event, if any
  SimTime timeout_at = -1;         // when it fires
  // The engine's view of the request's deferral window while decoding (DeferredGrowth, through
  // KvLedger): open while kv_tokens > 0; zeroed when the window is settled (before any other
  // store call about the request) and on a new allocation (admission, swap-in).
  int64_t kv_tokens = 0;    // tokens held, deferred ones included
  int64_t kv_room = 0;      // more tokens it may gain by deferral (0: the next goes to the store)
  int64_t kv_deferred = 0;  // tokens gained by deferral and not yet settled with the store
  bool kv_long = false;     // the window runs across blocks (DeferredGrowth::open_long)
  bool kv_swaps = false;    // and each of its crossings frees a block (long_window_swaps)
  // Order in the running batch: a number given each time it enters it (admission, swap-in,
  // transfer), increasing, so running order is run_seq order.
  int64_t run_seq = 0;
  // The decode aggregate (sim/serving/fast_forward/lazy_decodes.h, fast-forward mode): while a
  // member, its figures above are those at the end of step lazy_sync; -1: not a member (its figures
  // are explicit). lazy_planned: grown in the plan in progress (its figures include that step's
  // KV).
  int64_t lazy_sync = -1;
  bool lazy_planned = false;
  int32_t lazy_slot = -1;  // its slot in the aggregate's member table

  // Tokens whose KV must exist for the next step: the whole prompt plus what was generated.
  int64_t context_tokens() const { return prompt_tokens + generated; }
  int64_t max_total_tokens() const { return prompt_tokens + spec.output_tokens; }
  // Its true figures at any instant, in both modes: `lag` is the aggregate's (RunQueues::lag),
  // `store_tokens` the KV store's tokens for it (KvStore::tokens; 0 when it holds none), asked
  // only when no deferral window is open (the window's count is then the one that holds).
  int64_t generated_at(AggregateLag lag) const { return generated + lag.generated; }
  int64_t kv_tokens_held(int64_t store_tokens, AggregateLag lag) const {
    return (kv_tokens > 0 ? kv_tokens : store_tokens) + lag.kv_tokens;
  }
  // A preempted request re-enters the running batch at `now`: close its preempted interval.
  void end_preemption(SimTime now) {
    if (preempted_at < 0) return;
    (first_token_at < 0 ? preempted_before_first_token : preempted_after_first_token) +=
        now - preempted_at;
    preempted_at = -1;
  }
  // Running with its (re)prefill done: each iteration adds its new tokens (one, or with
  // speculative decoding one plus the drafts it accepts).
  bool decoding() const { return phase == Phase::kRunning && prefilled >= prefill_target; }
};

}  // namespace kvsim
