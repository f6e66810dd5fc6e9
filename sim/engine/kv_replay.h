// An untimed replay of a request list through a KV store (`kvsim mem`): requests are admitted in
// arrival order up to a concurrency limit; every iteration each running request gains one token;
// a request that has produced its output tokens frees its KV. Time is counted in iterations, and
// decode runs in which no request allocates or finishes are fast-forwarded in closed form (the
// figures move linearly in between, which the accumulator integrates exactly).
//
// Failures: an admission that fails blocks the queue until a running request finishes (it is
// retried then; each failed attempt counts). A request that fails with nothing else running can
// never fit and is rejected. A failed grow preempts the request (vLLM's recompute): it frees its
// KV and goes back to the front of the queue.
#pragma once

#include <cstdint>
#include <vector>

#include "models/memory/kv_metrics.h"
#include "models/memory/kv_store.h"

namespace kvsim {

struct ReplayRequest {
  int64_t prompt_tokens = 0;  // >= 1
  int64_t output_tokens = 0;  // >= 1
  std::vector<uint64_t> prefix_hashes;
  int64_t hash_block_tokens = 0;
};

struct ReplayOptions {
  int64_t max_inflight = 64;
  // Run KvStore::check_invariants() after every event (slow; for tests).
  bool check_invariants = false;
};

struct ReplayResult {
  int64_t requests = 0;  // in the input
  int64_t completed = 0;
  int64_t rejected = 0;        // could never fit (too long, or larger than the whole store)
  int64_t alloc_failures = 0;  // failed allocate/grow attempts (each retry counts)
  int64_t preemptions = 0;     // failed grows that sent a request back to the queue
  int64_t oom_capacity = 0;    // failures by reason
  int64_t oom_fragmentation = 0;
  int64_t oom_too_long = 0;
  int64_t iterations = 0;     // replay length in decode iterations
  int64_t events = 0;         // iterations actually stepped (the rest were fast-forwarded)
  int64_t peak_kv_bytes = 0;  // peak bytes held for requests (live + internal + reservation)
  int64_t peak_live_bytes = 0;
  int64_t peak_footprint_bytes = 0;
  int64_t peak_inflight = 0;
  KvWasteSummary waste;  // time-weighted (per iteration)
  // The vLLM paper's Figure 2 view, time-weighted: each category over the whole KV space
  // (capacity), with the allocator's rounding (KvUsage::rounding_bytes) moved from internal to
  // external, and free space that is not a hole too small for the last request counted as
  // external too ("external frag. & others"): usage_efficiency is the token-states share,
  // external_fraction = 1 - the other three.
  KvWasteSummary of_kv_space;
};

// Replays `requests` in order through `store`, which must be empty; it is empty again after.
ReplayResult replay_kv(KvStore& store, const std::vector<ReplayRequest>& requests,
                       const ReplayOptions& options);

}  // namespace kvsim
