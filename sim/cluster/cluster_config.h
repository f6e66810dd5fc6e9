// The scenario's `cluster:` section (docs/cluster.md): groups of identical replicas and the
// router in front of them. A policy may replace the router (`policies[i].cluster.router`) and the
// replica groups (`policies[i].cluster.replicas`: colocated vs disaggregated on the same traffic).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/config_node.h"

namespace kvsim {

struct ReplicaGroupConfig {
  std::string name;                   // labels its replicas "<name>-<index>"
  int count = 1;
  std::string role = "mixed";         // mixed, prefill or decode (docs/cluster.md)
  std::optional<ConfigNode> gpu;      // a catalog name or inline spec; absent: the policy's
  std::optional<ConfigNode> model;    // likewise (a catalog name, file or inline spec)
  std::optional<ConfigNode> engine;   // merged over the policy's engine (peeked, not read)
};

struct ClusterConfig {
  std::vector<ReplicaGroupConfig> groups;
  ConfigNode router;  // the `router:` map the policy runs with
  // `kv_transfer: {gb_per_s, latency_us}`: the prefill-to-decode KV link (disaggregated runs).
  double kv_transfer_gb_per_s = 100;
  double kv_transfer_latency_us = 0;
  int replicas() const;
};

// The cluster `policy` runs on: nullopt when the scenario has no `cluster:` (one replica, as
// before). Errors (file:line:col) for a malformed section, a policy `cluster:` without a
// scenario one, and keys other than `router` and `replicas` in a policy's `cluster:`.
std::optional<ClusterConfig> cluster_config(const ConfigNode& root, const ConfigNode& policy);

}  // namespace kvsim
