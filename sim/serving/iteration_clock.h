// Where an iteration's duration comes from. By default the latency model gives it (no clock); a
// replica given an IterationClock asks the clock instead, with what the iteration runs per
// sequence, so the clock can execute that batch for real and return its measured time
// (`kvsim-validate replay`, docs/fidelity.md). Everything else in the engine is unchanged: the
// same scheduler, admission, KV store and preemption code as `kvsim run`. A replica with a clock
// never fast-forwards (each iteration must be asked for).
#pragma once

#include <cstdint>
#include <vector>

#include "models/latency/latency_model.h"

namespace kvsim {

// One sequence's work in an iteration. Its KV holds `kv_before` tokens when the iteration starts
// (the prompt tokens already prefilled, prefix-cache hits included, or prompt + generated - 1
// for a decoding sequence); the iteration computes `new_tokens` more (a prefill chunk, or 1 for a
// decode step) and their KV, attending to kv_before + new_tokens tokens (causally within the
// chunk). emits_token: the chunk ends the prefill (or it is a decode step), so the LM head runs
// for its last position.
struct ClockSeq {
  int64_t request_id = 0;
  int64_t kv_before = 0;
  int64_t new_tokens = 0;
  bool emits_token = false;
};

struct ClockBatch {
  std::vector<ClockSeq> prefill;           // in the plan's order
  std::vector<ClockSeq> decode;            // in the plan's order
  double start_s = 0;                      // simulated time the iteration starts at, seconds
  const BatchShape* shape = nullptr;       // what the latency model was given
  const IterationCost* modeled = nullptr;  // the latency model's cost of this iteration
};

class IterationClock {
 public:
  virtual ~IterationClock() = default;
  // Seconds the iteration takes (> 0). Called once per iteration, in simulated-time order.
  virtual double seconds(const ClockBatch& batch) = 0;
  // The engine no longer holds request_id's KV (it finished, was preempted, swapped out, or
  // lost in a crash): the clock may drop what it keeps for it. A later batch may name the same
  // id again with kv_before > 0 (a swap-in or a prefix-cache hit): a clock that keeps real KV
  // fills what it lacks outside its timed region.
  virtual void release(int64_t /*request_id*/) {}
  // The replica crashed: every request's KV is gone.
  virtual void release_all() {}
};

}  // namespace kvsim
