// ReplicaObserver: what a replica reports, as it happens, to whoever watches it (the timeline
// trace, sim/timeline/). One interface for every watcher; the replica calls it at points it
// already has (an iteration ends, an OOM, a restart, a preemption, a request's outcome). Without
// an observer (the default) the replica pays one null-pointer test per call site and computes
// nothing for it. Request events (on_request) come from sim/serving/replica_observe.cc.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/sim_time.h"
#include "sim/request/outcome.h"

namespace kvsim {

// The replica's state right after the observed point: what the timeline's counters show.
struct ReplicaState {
  SimTime t = 0;
  int64_t kv_used_bytes = 0;      // KV held for requests: live + waste (MemorySnapshot)
  int64_t kv_free_bytes = 0;      // preallocated KV capacity held by no request
  int64_t driver_free_bytes = 0;  // what cudaMemGetInfo would report free
  int64_t guard_queue = 0;        // requests a guard holds back
  int64_t waiting = 0;            // admitted, waiting for their prefill (or to recompute)
  int64_t running = 0;            // in the running batch
  // The offload tiers' bytes per GPU (engine.kv_offloading); -1: the replica has no such tier.
  int64_t cpu_tier_bytes = -1;
  int64_t disk_tier_bytes = -1;
};

// One forward pass: when it ran and what it computed.
struct IterationShape {
  SimTime start = 0;
  SimTime end = 0;
  int64_t prefill_tokens = 0;  // prompt tokens computed (chunks summed)
  int64_t prefill_seqs = 0;    // requests with a prefill chunk
  int64_t decode_seqs = 0;     // decoding requests: one token each
};

enum class ReplicaEvent {
  kOomCrash,   // an OOM killed the server (engine.on_oom: crash); every request in it is lost
  kOomAbort,   // an OOM aborted one request (engine.on_oom: abort_request)
  kRestarted,  // the server is back after a crash (restart_s later)
  kPreempted,  // a running request gave up its KV (recompute or swap)
  kFinished,   // a request reached its outcome (the outcome says which)
};

// One request's life as a replica sees it (`kvsim run --trace-request`, docs/trace-request.md).
// Told at the points where its state changes, the same with the fast-forward on and off: a
// request that completes inside a fast-forward stretch finishes through the same call as one
// that completes when stepping.
enum class RequestEventKind {
  kArrived,       // it reached the replica (detail: "transferred" for a disaggregated decode side)
  kQueuedBehind,  // it arrived behind the guard queue (first come, first served): it waits there
  kGuard,         // a guard decided other than admit (detail: the guard and its reason)
  kAdmitted,      // past the guards: it waits in the engine's queue for its prefill
  kScheduled,     // it entered the running batch for a (re)prefill (its first chunk allocated)
  kPrefillChunk,  // an iteration computed a chunk of its prefill (chunk_tokens)
  kPrefillDone,   // its (re)prefill ended with a token (generated == 1: the first token)
  kPreempted,     // it gave up its KV: swapped to host memory (swapped_tokens > 0) or to recompute
  kSwappedIn,     // its KV came back from host memory: it decodes again
  kFinished,      // its outcome
};

struct RequestEvent {
  RequestEventKind kind = RequestEventKind::kArrived;
  SimTime t = 0;
  int64_t id = 0;
  int64_t prompt_tokens = 0;  // after any truncation
  int64_t output_tokens = 0;
  int64_t generated = 0;  // its true count (RequestState::generated_at)
  int64_t prefilled = 0;  // of the current (re)prefill's prefill_target tokens
  int64_t prefill_target = 0;
  int64_t chunk_tokens = 0;    // kPrefillChunk
  int64_t kv_tokens = 0;       // KV tokens it holds on the GPU after the event
  int64_t kv_blocks = -1;      // paged blocks it holds after the event; -1: not a paged store
  int64_t swapped_tokens = 0;  // KV tokens it holds in host memory
  int preemptions = 0;
  Outcome outcome = Outcome::kNone;  // kFinished
  std::string_view detail;           // kGuard, kArrived (valid during the call only)
};

class ReplicaObserver {
 public:
  virtual ~ReplicaObserver() = default;
  // Whether it watches every iteration (on_iteration, the timeline): the replica then steps
  // each one as an event (no fast-forward). One that watches requests only keeps it on.
  virtual bool needs_every_iteration() const { return true; }
  virtual void on_request(const RequestEvent& /*event*/) {}
  virtual void on_iteration(const IterationShape& /*shape*/, const ReplicaState& /*after*/) {}
  // `request_id` is -1 for a restart; `outcome` is set for kFinished only.
  virtual void on_event(ReplicaEvent /*kind*/, int64_t /*request_id*/, Outcome /*outcome*/,
                        const ReplicaState& /*now*/) {}
};

}  // namespace kvsim
