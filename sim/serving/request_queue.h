// The waiting and swapped queues of a replica, one class per engine.scheduling_policy, as vLLM
// keeps one request-queue class per policy (vllm/v1/core/sched/request_queue.py:
// FCFSRequestQueue, PriorityRequestQueue, made by create_request_queue). A policy decides three
// things, all here, so that RunQueues has no branch on it:
//   - where a request joins: an arrival, or a preempted request put back;
//   - which running request is preempted when KV blocks run short;
//   - whether the walk over the running requests ends at one that preempted itself.
//
//   fcfs                   arrival order, a preempted request back at the front; victim: the
//                          newest running request (vLLM's FCFS: running.pop())
//   priority               (priority, arrival), lowest value first, a preempted request back in
//                          its place by that key (PriorityRequestQueue); victim: the largest
//                          (priority, arrival), i.e. the lowest priority, latest arrival among
//                          equals (vLLM V1); a walk ends at a request that preempted itself
//   shortest_prompt_first  (prompt tokens, arrival); victim: the newest running request (a
//                          what-if; vLLM has no such policy)
// Ties beyond arrival go by id. A swapped queue under fcfs keeps the order requests were
// swapped out in (they join as arrivals do).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "sim/request/request_state.h"
#include "sim/serving/engine_config.h"

namespace kvsim {

class RequestQueue {
 public:
  using Requests = std::unordered_map<int64_t, RequestState>;
  virtual ~RequestQueue() = default;

  // Puts `id` in the queue: an arrival, or (`preempted`) a request put back after preemption.
  virtual void add(int64_t id, bool preempted) = 0;
  // The running request to preempt, of `running` (in running order, never empty).
  virtual RequestState* preemption_victim(const std::vector<RequestState*>& running) const;
  // Whether vLLM ends its walk over the running requests at one that preempted itself with
  // requests after it still unvisited (they wait the step out). Under fcfs the victim is the
  // last request, so nothing is after it.
  virtual bool walk_ends_at_self_preemption() const { return false; }

  bool empty() const { return ids_.empty(); }
  size_t size() const { return ids_.size(); }
  int64_t front() const { return ids_.front(); }
  void pop_front() { ids_.pop_front(); }
  // Removes `id` if it is queued.
  void erase(int64_t id);
  std::deque<int64_t>::const_iterator begin() const { return ids_.begin(); }
  std::deque<int64_t>::const_iterator end() const { return ids_.end(); }

 protected:
  std::deque<int64_t> ids_;
};

// The queue of `policy`; `requests` (which must outlive it) gives the ordered policies their keys.
std::unique_ptr<RequestQueue> make_request_queue(EngineConfig::SchedulingPolicy policy,
                                                 const RequestQueue::Requests& requests);

}  // namespace kvsim
