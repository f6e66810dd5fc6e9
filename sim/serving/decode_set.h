// DecodeSet: the running batch's decoding requests as RunQueues plans them, the one seam between
// the queues and the fast-forward. RunQueues tells it when a running request starts or stops
// decoding and hands it the decode walk of a plan and the commit of a step; it never asks which
// kind it holds. Two implementations:
//   StepDecodes       (step_decodes.h) every decoding request walked in every plan, and given
//                     its token when the step ends: stepping (engine.fast_forward: false, or a
//                     replica that reads every request at every step)
//   AggregateDecodes  (fast_forward/aggregate_decodes.h) the decode aggregate: a request touched
//                     only at its own events (the fast-forward's; docs/fast-forward.md)
// Both make every call that changes the store, with the same arguments in the same order.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/request/request_state.h"
#include "sim/serving/scheduler.h"

namespace kvsim {

class DecodeSet {
 public:
  virtual ~DecodeSet() = default;

  // `r` entered the running batch prefilling (admitted, or recomputing).
  virtual void started_prefill(RequestState& r) = 0;
  // `r`'s (re)prefill ended with its first token; `done`: it has all its tokens (it finishes),
  // else it decodes from the next step on.
  virtual void prefilled(RequestState& r, bool done) = 0;
  // `r` entered the running batch decoding (swapped in, its transferred KV received).
  virtual void join(RequestState& r) = 0;
  // `r` leaves the running batch or stops growing (preempted, finishing): its figures are written
  // out first, before anything reads them. A no-op for a request that is not in the set.
  virtual void leave(RequestState& r) = 0;

  // The plan step RunQueues::grow_decodes: every decoding request grows by one token into `it`
  // (decode, decode_seqs, decode_context, running_prefills), a shortage preempting. False when an
  // OOM ended the plan.
  virtual bool grow(IterationPlan& it) = 0;
  // it.decode_seqs and it.decode_context again, after a preemption took a decode out of `it`.
  virtual void recount(IterationPlan& it) const = 0;
  // The step `it` ran (end_iteration, before its prefills are counted): its decodes have their
  // token, and the ones that made their last are appended to `done`, in running order.
  virtual void commit(const IterationPlan& it, std::vector<int64_t>& done) = 0;

  // How far `r`'s stored figures lag its true ones (zero when they are its true ones).
  virtual AggregateLag lag(const RequestState& r) const = 0;
  // The running requests admit_prefills' walk over running prefills visits, in running order: the
  // running batch, or (with the aggregate) exactly its requests still prefilling.
  virtual const std::vector<RequestState*>& prefill_walk() const = 0;
  // The first running request still prefilling, in running order; nullptr when none.
  virtual const RequestState* first_prefilling() const = 0;
  // Whether every decoding request's RequestState holds its true figures at every plan (the
  // running walk in order, RunQueues::walk_running, grows them one by one itself).
  virtual bool explicit_figures() const = 0;
};

}  // namespace kvsim
