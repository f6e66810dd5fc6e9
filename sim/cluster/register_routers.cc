// The routers `cluster.router.type` may name, registered explicitly (static-initializer
// registration silently vanishes when a static library drops an unreferenced object file).
#include "sim/cluster/router.h"

namespace kvsim {

void register_routers(Registry<RouterFactory>& registry) {
  registry.add({.name = "round_robin",
                .description = "each replica in turn, skipping those that are down",
                .keys = {},
                .make = make_round_robin_router});
  registry.add({.name = "random",
                .description = "a uniform draw among the up replicas (seeded from the scenario)",
                .keys = {},
                .make = make_random_router});
  registry.add(
      {.name = "least_outstanding",
       .description = "the up replica with the fewest requests in flight (lowest index on ties)",
       .keys = {},
       .make = make_least_outstanding_router});
  registry.add({.name = "least_kv",
                .description = "the up replica reporting the lowest KV cache usage",
                .keys = {},
                .make = make_least_kv_router});
  registry.add({.name = "session_affinity",
                .description =
                    "a hash of the trace's session_id (else the closed-loop client) picks "
                    "the replica; neither: least_outstanding",
                .keys = {},
                .make = make_session_affinity_router});
  registry.add({.name = "prefix_affinity",
                .description = "a hash of the prompt's first prefix block picks the replica; no "
                               "prefix hashes: least_outstanding",
                .keys = {},
                .make = make_prefix_affinity_router});
  registry.add({.name = "precise_prefix",
                .description = "the longest prefix each replica holds, from its engines' KV "
                               "events, GPU blocks weighted gpu_weight (1.0), CPU cpu_weight "
                               "(0.8), disk disk_weight (0.5); ties: least_outstanding",
                .keys = {"gpu_weight", "cpu_weight", "disk_weight"},
                .make = make_precise_prefix_router});
  registry.add({.name = "dp_balance",
                .description = "vLLM's data-parallel balancer: the lowest 4 x waiting + running "
                               "from the engines' counts published every stats_interval_ms (100)",
                .keys = {"stats_interval_ms"},
                .make = make_dp_balance_router});
}

const Registry<RouterFactory>& router_registry() {
  static const Registry<RouterFactory> registry =
      Registry<RouterFactory>::filled("router", register_routers);
  return registry;
}

std::unique_ptr<Router> make_router(const ConfigNode& node, const RouterContext& context) {
  if (!node.is_map()) node.fail_expected("a router map like {type: least_outstanding}");
  const auto& entry = router_registry().choose(node, "type", "round_robin");
  node.allow(entry.keys);
  auto router = entry.make(node, context);
  node.reject_unknown_keys();
  return router;
}

}  // namespace kvsim
