// AdmissionQueue: a replica's guards and the queue of requests they hold back (the guards'
// `queue` action), with the timeouts of queued requests. A request that passes every guard
// (possibly truncated) goes on to the replica's run queues through Hooks::admitted; one a guard
// rejects, or whose timeout fires, ends through Hooks::finish. First come, first served: the head
// of the queue blocks the ones behind it.
//
// A request that arrives while the queue is non-empty queues behind it (no overtaking, as vLLM's
// FCFS waiting queue) and is checked by the guards only when it reaches the head; its timeout runs
// from its arrival, with the shortest timeout among the policy's queueing guards
// (Guard::queue_timeout). Every queued request thus has its own timeout.
//
// A request may also carry a deadline (max_queue_time, RequestState::deadline_at): it bounds the
// whole wait before its first scheduling, in the guard queue and then in the engine's waiting
// queue. One event per request serves both bounds, at the earlier of those that apply; when it
// fires, the request ends as timed_out. A request that was scheduled once (even if preempted
// since) never times out.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "models/memory/gpu_memory_pool.h"
#include "sim/engine/event_queue.h"
#include "sim/guards/guard.h"
#include "sim/metrics/observer.h"
#include "sim/request/outcome.h"
#include "sim/request/request_state.h"

namespace kvsim {

class AdmissionQueue {
 public:
  struct Hooks {
    std::function<void(RequestState& r)> admitted;            // passed every guard
    std::function<void(int64_t id, Outcome outcome)> finish;  // rejected, or timed out
    std::function<void()> timed_out;    // after a timeout ended a request: the queue may move
    std::function<int64_t()> inflight;  // admitted and not finished (for the guards)
    // For the replica's observer (may be empty): `r` arrived behind the queue (kQueuedBehind) or
    // passed every guard (kAdmitted); a guard decided other than admit (a queue decision only
    // when it first queues `r`).
    std::function<void(const RequestState& r, RequestEventKind kind)> observe;
    std::function<void(const RequestState& r, std::string_view guard, const Decision& d)>
        guard_decided;
  };
  // Collaborators are borrowed; they must outlive the queue. `requests` holds every request in
  // flight (timeouts look their request up there).
  AdmissionQueue(EventQueue& events, GpuMemoryPool& pool,
                 std::vector<std::unique_ptr<Guard>> guards,
                 std::unordered_map<int64_t, RequestState>& requests, Hooks hooks);

  // A request arrived (phase kGuardQueue). Checked by the guards at once when the queue is
  // empty; true when admitted.
  bool arrive(RequestState& r);
  // Admits from the head of the queue while the guards allow.
  void run();
  // `r` is finishing, whatever its phase: the guards release what they reserved for it, it leaves
  // the queue, and its timeout is cancelled.
  void on_finish(RequestState& r);
  // `r` entered the running batch for the first time: its deadline no longer applies.
  void on_scheduled(RequestState& r);
  // The replica restarted: the guards forget every reservation.
  void on_restart();
  // The guards' scheduler-side checks (Guard::check_allocation) on allocating `tokens` of KV for
  // the waiting request `r` now: the first answer other than kOk, else kOk.
  AllocFit check_allocation(const RequestState& r, int64_t tokens) const;

  int64_t size() const { return static_cast<int64_t>(queue_.size()); }
  bool has_guards() const { return !guards_.empty(); }

 private:
  GuardContext guard_context(const MemorySnapshot& snap) const;
  // Applies the guards to one request; false if it stays queued (or was rejected).
  bool try_admit(RequestState& r);
  // (Re)schedules r's timeout event at the earliest bound that applies now (the guard's while it
  // is guard-queued, the deadline until its first scheduling), at once if that is past; cancels
  // it when none applies. Keeps the pending event when its time does not change.
  void arm_timeout(RequestState& r);
  void cancel_timeout(RequestState& r);
  // The timeout of a request queued behind others: the shortest finite one of the guards that
  // queue (-1 when all of them wait forever, or none queues).
  SimTime queue_behind_timeout() const;

  EventQueue& events_;
  GpuMemoryPool& pool_;
  std::vector<std::unique_ptr<Guard>> guards_;
  std::unordered_map<int64_t, RequestState>& requests_;
  Hooks hooks_;
  std::deque<int64_t> queue_;
};

}  // namespace kvsim
