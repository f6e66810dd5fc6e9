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
#include "sim/engine/event_queue.h"
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
    // Decoding sequences, by address: no lookup per sequence. Safe because a running request
    // stays in requests_ until end_iteration (finish_request checks it).
    std::vector<RequestState*> decode;
    int64_t decode_context = 0;  // sum of the decoding sequences' context tokens
    // Running requests still prefilling, counted by grow_decodes (an upper bound: preemption
    // may remove some); -1 when not counted. 0 lets admit_prefills skip its walk over running_.
    int64_t running_prefills = -1;
    double extra_seconds = 0;  // swap traffic over PCIe
    // Empties the iteration, keeping the vectors' capacity (no allocation per iteration).
    void clear() {
      prefill_ids.clear();
      prefill_chunks.clear();
      decode.clear();
      decode_context = 0;
      running_prefills = -1;
      extra_seconds = 0;
    }
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
  // Deferred decode growth (KvStore::deferrable_tokens): report the tokens deferred so far to
  // the store; settle one request's deferred tokens before any other store call about it; forget
  // the engine's view of a request's KV when its allocation changes elsewhere.
  void report_deferred();
  void settle_kv(RequestState& r);
  static void forget_kv(RequestState& r) { r.kv_tokens = r.kv_room = 0; }
  // Ends in_flight_, the iteration the event queue is running.
  void end_iteration();

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
  // The store takes deferred growth: a decoding sequence that stays inside its last block costs
  // no store call. unreported_deferred_ counts such tokens not yet passed to add_deferred().
  DeferredGrowth* deferral_ = nullptr;
  int64_t unreported_deferred_ = 0;

  // In flight, by id. Walks over it sort the ids first, so outcomes keep a fixed order. Its
  // elements never move (node-based), so running_ and the iterations hold their addresses and the
  // per-iteration work does no lookup.
  std::unordered_map<int64_t, RequestState> requests_;
  std::deque<int64_t> guard_queue_;
  std::deque<int64_t> waiting_;
  // Admission order: the newest is preempted first. Elements of requests_.
  std::vector<RequestState*> running_;
  // The iteration being planned and the one in flight (at most one: busy_); reused, so their
  // vectors keep their capacity.
  Iteration planning_;
  Iteration in_flight_;
  std::vector<RequestState*> order_scratch_;  // running_ as it was when a walk started
  std::vector<BatchChunk> chunk_scratch_;
  std::deque<int64_t> swapped_;
  int64_t swap_used_bytes_ = 0;
  bool busy_ = false;
  bool down_ = false;
  SimTime down_until_ = 0;
};

}  // namespace kvsim
