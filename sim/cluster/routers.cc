// The routers of docs/cluster.md's table. Each skips replicas that are down; ties go to the lowest
// index, so every choice is deterministic.
#include "core/fnv1a.h"
#include "sim/cluster/router.h"
#include "workloads/random.h"

namespace kvsim {

namespace {

// The up replica with the smallest key(view), lowest index on ties; -1 when none is up.
template <class Key>
int argmin_up(std::span<const ReplicaView> replicas, Key key) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(replicas.size()); ++i) {
    if (!replicas[i].up) continue;
    if (best < 0 || key(replicas[i]) < key(replicas[best])) best = i;
  }
  return best;
}

// The first up replica at or after `start` (cyclically); -1 when none is up.
int next_up(std::span<const ReplicaView> replicas, size_t start) {
  const size_t n = replicas.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (start + k) % n;
    if (replicas[i].up) return static_cast<int>(i);
  }
  return -1;
}

// Takes the replicas in turn: request k goes to replica k mod n, skipping those that are down.
class RoundRobinRouter final : public Router {
 public:
  int route(const RequestSpec&, std::span<const ReplicaView> replicas) override {
    const int i = next_up(replicas, next_ % replicas.size());
    if (i >= 0) next_ = static_cast<size_t>(i) + 1;
    return i;
  }

 private:
  size_t next_ = 0;
};

// A uniform draw among the up replicas, from its own stream of the scenario's seed.
class RandomRouter final : public Router {
 public:
  explicit RandomRouter(uint64_t seed) : rng_(derive_seed(seed, kRouterStream)) {}
  int route(const RequestSpec&, std::span<const ReplicaView> replicas) override {
    int up = 0;
    for (const ReplicaView& r : replicas) up += r.up ? 1 : 0;
    if (up == 0) return -1;
    int k = static_cast<int>(rng_.uniform_int(0, up - 1));
    for (int i = 0; i < static_cast<int>(replicas.size()); ++i) {
      if (replicas[i].up && k-- == 0) return i;
    }
    return -1;  // unreachable
  }

 private:
  // Far from the workload generators' streams (small integers), so routing draws never share one.
  static constexpr uint64_t kRouterStream = 0x726f75746572ull;  // "router"
  Rng rng_;
};

int least_outstanding(std::span<const ReplicaView> replicas) {
  return argmin_up(replicas, [](const ReplicaView& r) { return r.outstanding; });
}

class LeastOutstandingRouter final : public Router {
 public:
  int route(const RequestSpec&, std::span<const ReplicaView> replicas) override {
    return least_outstanding(replicas);
  }
};

class LeastKvRouter final : public Router {
 public:
  int route(const RequestSpec&, std::span<const ReplicaView> replicas) override {
    // Equal usage (an idle cluster): fewest outstanding, then the lowest index.
    int best = -1;
    for (int i = 0; i < static_cast<int>(replicas.size()); ++i) {
      const ReplicaView& r = replicas[i];
      if (!r.up) continue;
      if (best < 0 || r.kv_usage < replicas[best].kv_usage ||
          (r.kv_usage == replicas[best].kv_usage && r.outstanding < replicas[best].outstanding)) {
        best = i;
      }
    }
    return best;
  }
};

// A key's replica: key mod n, then the next up replica (a restarting replica's keys move to its
// neighbour and come back when it is up again).
int hashed(uint64_t key, std::span<const ReplicaView> replicas) {
  // FNV-1a over the key's bytes spreads consecutive ids (sessions 0, 1, 2, ...) evenly.
  char bytes[8];
  for (int b = 0; b < 8; ++b) bytes[b] = static_cast<char>(key >> (8 * b));
  return next_up(replicas, fnv1a64(std::string_view(bytes, 8)) % replicas.size());
}

// The same session always to the same replica (vLLM production-stack's session router). The
// session is the trace's session_id, else the closed-loop client; a request with neither goes to
// the replica with the fewest outstanding requests.
class SessionAffinityRouter final : public Router {
 public:
  int route(const RequestSpec& spec, std::span<const ReplicaView> replicas) override {
    if (spec.session_id) return hashed(*spec.session_id, replicas);
    if (spec.client >= 0) return hashed(static_cast<uint64_t>(spec.client), replicas);
    return least_outstanding(replicas);
  }
};

// Requests whose prompts start with the same KV block go to the same replica, so its prefix cache
// serves them (the first block's hash; SGLang router's cache_aware policy matches whole prefixes).
// A request without prefix hashes goes to the replica with the fewest outstanding requests.
class PrefixAffinityRouter final : public Router {
 public:
  int route(const RequestSpec& spec, std::span<const ReplicaView> replicas) override {
    if (!spec.prefix_hashes.empty()) return hashed(spec.prefix_hashes.front(), replicas);
    return least_outstanding(replicas);
  }
};

}  // namespace

std::unique_ptr<Router> make_round_robin_router(const ConfigNode&, const RouterContext&) {
  return std::make_unique<RoundRobinRouter>();
}
std::unique_ptr<Router> make_random_router(const ConfigNode&, const RouterContext& c) {
  return std::make_unique<RandomRouter>(c.seed);
}
std::unique_ptr<Router> make_least_outstanding_router(const ConfigNode&, const RouterContext&) {
  return std::make_unique<LeastOutstandingRouter>();
}
std::unique_ptr<Router> make_least_kv_router(const ConfigNode&, const RouterContext&) {
  return std::make_unique<LeastKvRouter>();
}
std::unique_ptr<Router> make_session_affinity_router(const ConfigNode&, const RouterContext&) {
  return std::make_unique<SessionAffinityRouter>();
}
std::unique_ptr<Router> make_prefix_affinity_router(const ConfigNode&, const RouterContext&) {
  return std::make_unique<PrefixAffinityRouter>();
}

}  // namespace kvsim
