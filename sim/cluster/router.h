// A cluster's router: where each arriving request goes. It sees what a load balancer in front of
// the replicas sees (docs/cluster.md): per replica, the requests it sent there that have not
// finished, the KV cache usage the replica reports, and whether the replica is up (a replica
// restarting after an OOM crash is down). Never the replica's queues or its memory internals.
// Routers are named by `cluster.router.type` through a Registry<RouterFactory>
// (register_routers.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "core/config_node.h"
#include "core/registry.h"
#include "core/sim_time.h"
#include "models/memory/kv_events.h"
#include "workloads/request_spec.h"

namespace kvsim {

// One replica as the router sees it.
struct ReplicaView {
  int64_t outstanding = 0;  // routed here and not yet finished
  double kv_usage = 0;      // KV held for requests / the KV pool (vLLM's kv_cache_usage_perc)
  bool up = true;           // false while restarting after an OOM crash
  // The engine's own request counts (vLLM's published [waiting, running]); given to a router
  // only through on_stats, as published (routers with a stats_interval).
  int64_t waiting = 0;
  int64_t running = 0;
};

class Router {
 public:
  virtual ~Router() = default;
  // The index of the replica `spec` goes to, or -1 when none is up. Only up replicas are chosen.
  virtual int route(const RequestSpec& spec, std::span<const ReplicaView> replicas) = 0;
  // A router that reads the engines' published stats: the cluster publishes them (on_stats, with
  // each replica's waiting and running counts) at most every stats_interval(), as vLLM's DP
  // coordinator does. 0 (the default): no publishing.
  virtual SimTime stats_interval() const { return 0; }
  virtual void on_stats(std::span<const ReplicaView> /*replicas*/) {}
  // A router that indexes the engines' KV events (models/memory/kv_events.h), as llm-d's precise
  // prefix-cache scorer does: the cluster then sends it every event of every replica's tiers,
  // tagged with the replica's index, as it happens.
  virtual bool wants_kv_events() const { return false; }
  virtual void on_kv_event(int /*replica*/, const KvBlockEvent& /*event*/) {}
};

struct RouterContext {
  uint64_t seed = 0;  // the scenario's seed (random routing)
};

// Builds a router from its `cluster.router` map (keys already declared by the registry entry).
using RouterFactory =
    std::function<std::unique_ptr<Router>(const ConfigNode& node, const RouterContext& context)>;

const Registry<RouterFactory>& router_registry();
void register_routers(Registry<RouterFactory>& registry);

// The router `node` names (`type:`, default round_robin); unknown keys are errors.
std::unique_ptr<Router> make_router(const ConfigNode& node, const RouterContext& context);

// The factories (routers.cc).
std::unique_ptr<Router> make_round_robin_router(const ConfigNode&, const RouterContext&);
std::unique_ptr<Router> make_random_router(const ConfigNode&, const RouterContext&);
std::unique_ptr<Router> make_least_outstanding_router(const ConfigNode&, const RouterContext&);
std::unique_ptr<Router> make_least_kv_router(const ConfigNode&, const RouterContext&);
std::unique_ptr<Router> make_session_affinity_router(const ConfigNode&, const RouterContext&);
std::unique_ptr<Router> make_prefix_affinity_router(const ConfigNode&, const RouterContext&);
std::unique_ptr<Router> make_precise_prefix_router(
    const ConfigNode&,
    const RouterContext&);  // precise_prefix_router.cc
std::unique_ptr<Router> make_dp_balance_router(const ConfigNode&,
                                               const RouterContext&);  // dp_balancer.cc

}  // namespace kvsim
