// One GPU replica serving requests: guards at admission, a continuous (iteration-level) or
// static batching scheduler, KV growth through the memory pool every iteration, preemption on
// block shortage, and OOM handling (crash and restart, or abort the request). One forward pass is
// one event; its duration comes from the latency model.
#pragma once

#include <deque>
#include <functional>
#include <unordered_map>
#include <memory>
#include <vector>

#include "models/latency/latency_model.h"
#include "models/memory/gpu_memory_pool.h"
#include "sim/core/event_queue.h"
#include "sim/guards/guard.h"
#include "sim/metrics/recorder.h"
#include "sim/serving/engine_config.h"
#include "sim/serving/request_state.h"

namespace kvsim {

class Replica {
 public:
  // Collaborators are borrowed; they must outlive the replica.
  Replica(EventQueue& events, GpuMemoryPool& pool, const LatencyModel& latency,
          EngineConfig config, std::vector<std::unique_ptr<Guard>> guards, Recorder& recorder);

  // A request arrives now (events.now()).
  void arrive(const RequestSpec& spec);
  // Called with every request that reaches its outcome (closed-loop clients hook in here).
  void set_on_finished(std::function<void(const RequestState&)> fn) { on_finished_ = std::move(fn); }
  // Checking mode: pool and bookkeeping invariants after every iteration and admission.
  void set_check_invariants(bool on) { check_ = on; }

  // Sampler hook: a timeseries row now.
  void sample();
  // Ends the run: whatever is still in flight when the clock stops is not counted twice; callers
  // run the event queue dry first, so this only checks that nothing is left.
  void finish();

  int64_t inflight() const { return static_cast<int64_t>(waiting_.size() + running_.size() + swapped_.size()); }
  bool idle() const { return requests_.empty(); }

 private:
  struct Iteration {
    std::vector<int64_t> prefill_ids;
    std::vector<int64_t> prefill_chunks;
    std::vector<int64_t> decode_ids;
    double extra_seconds = 0;  // swap traffic over PCIe
  };

  GuardContext guard_context(const MemorySnapshot& snap) const;
  // Runs the guards for the head of the guard queue, admitting while they allow.
  void run_guard_queue();
  // Applies the guards to one request; returns false if it must stay queued.
  bool try_admit(RequestState& r);
  void schedule_timeout(RequestState& r, SimTime timeout);

  void kick();  // starts an iteration if none is running and there is work
  void start_iteration();
  bool plan_continuous(Iteration& it);
  bool plan_static(Iteration& it);
  // Grows every decoding request by one token, preempting on shortage. False on OOM.
  bool grow_decodes(Iteration& it);
  bool admit_prefills(Iteration& it);
  // Grows `id`'s KV to `tokens` unless it already holds that many.
  AllocResult ensure_kv(int64_t id, int64_t tokens);
  void end_iteration(const Iteration& it);

  void preempt(int64_t id, Iteration& it);
  bool try_swap_in(Iteration& it);
  void oom(int64_t culprit, const AllocResult& why);
  void restart_done();

  void finish_request(int64_t id, Outcome outcome);
  void release_memory(RequestState& r);
  void check() const;

  EventQueue& events_;
  GpuMemoryPool& pool_;
  const LatencyModel& latency_;
  EngineConfig config_;
  std::vector<std::unique_ptr<Guard>> guards_;
  Recorder& recorder_;
  std::function<void(const RequestState&)> on_finished_;
  bool check_ = false;
  // KV space allocated up front (paged blocks, a contiguous arena): a shortage there means wait
  // or preempt. KV through the caching allocator is a live cudaMalloc: a shortage is an OOM.
  bool preallocated_ = false;

  // In flight, by id. Hashed: looked up for every request of every iteration. Walks over it
  // sort the ids first, so outcomes keep a fixed order.
  std::unordered_map<int64_t, RequestState> requests_;
  std::deque<int64_t> guard_queue_;
  std::deque<int64_t> waiting_;
  std::vector<int64_t> running_;  // admission order: the newest is preempted first
  std::deque<int64_t> swapped_;
  int64_t swap_used_bytes_ = 0;
  bool busy_ = false;
  bool down_ = false;
  SimTime down_until_ = 0;
};

}  // namespace kvsim
