// ReplicaObserver: what a replica reports, as it happens, to whoever watches it (the timeline
// trace, sim/timeline/). One interface for every watcher; the replica calls it at points it
// already has (an iteration ends, an OOM, a restart, a preemption, a request's outcome). Without
// an observer (the default) the replica pays one null-pointer test per call site and computes
// nothing for it.
#pragma once

#include <cstdint>

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

class ReplicaObserver {
 public:
  virtual ~ReplicaObserver() = default;
  virtual void on_iteration(const IterationShape& /*shape*/, const ReplicaState& /*after*/) {}
  // `request_id` is -1 for a restart; `outcome` is set for kFinished only.
  virtual void on_event(ReplicaEvent /*kind*/, int64_t /*request_id*/, Outcome /*outcome*/,
                        const ReplicaState& /*now*/) {}
};

}  // namespace kvsim
