// Where a served request's time went (requests.csv's breakdown columns):
//   guard_queue  arrival -> admitted past the guards (a queueing guard held it)
//   engine_wait  admitted -> first entered the running batch (the engine's waiting queue)
//   prefill      first scheduling -> first token, less time preempted in between (chunked
//                prefill steps included)
//   decode       first token -> finish, less time preempted in between
//   preempted    preemption -> re-entering the running batch (recompute wait or swapped),
//                summed over preemptions; a recompute's re-prefill is compute, so it counts as
//                prefill before the first token and as decode after it
// All in integer SimTime, so for a completed request the five sum to finished_at - arrival
// (E2E) exactly.
#pragma once

#include "core/sim_time.h"
#include "sim/request/request_state.h"

namespace kvsim {

struct RequestBreakdown {
  SimTime guard_queue = 0, engine_wait = 0, prefill = 0, decode = 0, preempted = 0;
  SimTime sum() const { return guard_queue + engine_wait + prefill + decode + preempted; }
};

// Requires: a request that produced its first token and finished (a served outcome).
inline RequestBreakdown request_breakdown(const RequestState& r) {
  RequestBreakdown b;
  b.guard_queue = r.admitted_at - r.spec.arrival;
  b.engine_wait = r.first_scheduled_at - r.admitted_at;
  b.prefill = r.first_token_at - r.first_scheduled_at - r.preempted_before_first_token;
  b.decode = r.finished_at - r.first_token_at - r.preempted_after_first_token;
  b.preempted = r.preempted_before_first_token + r.preempted_after_first_token;
  return b;
}

}  // namespace kvsim
