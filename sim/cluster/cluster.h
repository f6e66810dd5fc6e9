// Replicas behind a router (docs/cluster.md). Each replica is the single-replica engine of
// sim/serving (its own memory pool, scheduler, guards, OOM crashes and restarts) with its own
// recorder; the cluster only routes arrivals and keeps what a load balancer knows: the requests
// it sent to each replica and has not seen finish.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim/cluster/lockstep_group.h"
#include "sim/cluster/router.h"
#include "sim/metrics/recorder.h"
#include "sim/serving/replica.h"

namespace kvsim {

// Disaggregated prefill and decode (docs/cluster.md): the link a request's KV crosses from its
// prefill replica to its decode replica: latency_us + bytes / gb_per_s. Each prefill replica's
// outgoing link is one FIFO server: its transfers run one at a time.
struct KvTransfer {
  double gb_per_s = 0;  // 1e9 bytes per second
  double latency_us = 0;
  SimTime duration(int64_t bytes) const {
    return seconds_to_sim(latency_us * 1e-6 + static_cast<double>(bytes) / (gb_per_s * 1e9));
  }
};

enum class ReplicaRole { kMixed, kPrefill, kDecode };

class Cluster {
 public:
  // `totals` records what no replica sees: arrivals routed to nothing (every replica down).
  Cluster(EventQueue& events, std::unique_ptr<Router> router, Recorder& totals);

  // Adds a replica (its collaborators borrowed, as Replica's); `label` names it in results.
  // `kv_pool_bytes`: the denominator of the KV usage it reports (kv_pool_capacity_bytes()).
  Replica& add_replica(std::string label, GpuMemoryPool& pool, const LatencyModel& latency,
                       EngineConfig config, std::vector<std::unique_ptr<Guard>> guards,
                       Recorder& recorder, int64_t kv_pool_bytes,
                       ReplicaRole role = ReplicaRole::kMixed);
  void set_kv_transfer(KvTransfer t) { transfer_ = t; }
  // The replicas `ranks` (indices in add_replica's order) step in lockstep as one data-parallel
  // group of a MoE model (lockstep_group.h). After their add_replica calls, before any arrival.
  const LockstepGroup& add_lockstep_group(const std::vector<size_t>& ranks,
                                          LockstepOptions options);

  // A request arrives now: the router picks an up replica, or it fails as failed_unavailable.
  void arrive(const RequestSpec& spec);
  // Called with every request that reaches its outcome, on whichever replica.
  void set_on_finished(std::function<void(const RequestState&)> fn) {
    on_finished_ = std::move(fn);
  }
  void set_check_invariants(bool on);
  void sample();  // a timeseries row per replica, in order
  void finish();

  size_t size() const { return members_.size(); }

 private:
  struct Member {
    std::string label;
    std::unique_ptr<Replica> replica;
    double kv_pool_bytes = 0;
    int64_t outstanding = 0;
    ReplicaRole role = ReplicaRole::kMixed;
    // Its outgoing KV link: the transfers whose decode side has allocated, in that order, and
    // whether one is under way.
    std::deque<int64_t> link_queue;
    bool link_busy = false;
  };
  // A request between its first token (on `from`, holding its KV) and the end of its transfer
  // to `to` (which holds it in its swapped queue, then its KV while the transfer runs).
  struct Handoff {
    size_t from = 0, to = 0;
    int64_t bytes = 0;
    SimTime handed_at = 0;  // its first token: the wait for room and the link runs from here
  };
  // A prefill replica finished `r`'s first token: its KV will cross to a decode replica.
  void hand_off(const RequestState& r, size_t from);
  void pulled(int64_t id);           // the decode side allocated: queue on the prefill's link
  void start_transfer(size_t from);  // the link's next transfer, if it is free
  void transfer_done(size_t from, int64_t id);
  void abandoned(int64_t id);  // the decode side recomputes it: the prefill side frees
  void dropped(int64_t id);    // the prefill side lost its KV: it ends on the decode side
  // Forgets `id`'s hand-off (its transfer will not end it); returns it.
  Handoff forget(int64_t id);
  // The engines' request counts reach a stats-reading router (Router::stats_interval): the first
  // publish after a quiet spell comes at once, the next ones every interval while requests are
  // in flight (vllm/v1/engine/coordinator.py: at most every 100 ms while the stats change).
  void stats_changed();
  void publish_stats();

  EventQueue& events_;
  std::unique_ptr<Router> router_;
  Recorder& totals_;
  std::vector<std::unique_ptr<Member>> members_;
  std::vector<ReplicaView> views_;  // reused per arrival
  std::function<void(const RequestState&)> on_finished_;
  KvTransfer transfer_;
  std::map<int64_t, RequestSpec> handed_;  // prefill-only requests in flight: their full spec
  std::map<int64_t, Handoff> transfers_;   // first token out, transfer not yet ended
  std::vector<std::unique_ptr<LockstepGroup>> lockstep_;
  SimTime stats_interval_ = 0;  // the router's (0: no publishing)
  SimTime last_publish_ = -1;   // never yet
  bool publish_pending_ = false;
};

}  // namespace kvsim
