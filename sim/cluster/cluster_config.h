// The scenario's `cluster:` section (docs/cluster.md): groups of identical replicas and the
// router in front of them. A policy may replace the router (`policies[i].cluster.router`) and the
// replica groups (`policies[i].cluster.replicas`: colocated vs disaggregated on the same traffic).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "sim/cluster/lockstep_group.h"
#include "sim/serving/engine_config.h"

namespace kvsim {

struct ReplicaGroupConfig {
  std::string name;  // labels its replicas "<name>-<index>"
  int count = 1;
  std::string role = "mixed";        // mixed, prefill or decode (docs/cluster.md)
  std::optional<ConfigNode> gpu;     // a catalog name or inline spec; absent: the policy's
  std::optional<ConfigNode> model;   // likewise (a catalog name, file or inline spec)
  std::optional<ConfigNode> engine;  // merged over the policy's engine (peeked, not read)
  // `data_parallel: {lockstep, cuda_graphs, sync_us}` (docs/cluster.md "Lockstep data
  // parallelism"): whether the group's replicas, in runs of the engine's data_parallel, step in
  // lockstep as vLLM's DP ranks of a MoE model do. auto: when the model is MoE and data_parallel
  // > 1, as vLLM (DPEngineCoreProc serves MoE models only).
  enum class Lockstep { kAuto, kOn, kOff };
  Lockstep lockstep = Lockstep::kAuto;
  bool cuda_graphs = true;                  // ranks pad their batches to the largest rank's tokens
  double dp_sync_us = 0;                    // the per-step all-reduce of the batch metadata
  std::optional<ConfigNode> data_parallel;  // the map, for errors
};

struct ClusterConfig {
  std::vector<ReplicaGroupConfig> groups;
  ConfigNode router;  // the `router:` map the policy runs with
  // `kv_transfer: {gb_per_s, latency_us}`: the prefill-to-decode KV link (disaggregated runs).
  double kv_transfer_gb_per_s = 100;
  double kv_transfer_latency_us = 0;
  int replicas() const;
};

// One lockstep data-parallel group: its replicas' indices in the policy's order.
struct LockstepRanks {
  std::vector<size_t> ranks;
  LockstepOptions options;
};

// The lockstep groups of replica group `g`, whose replicas are `first`, first + 1, ... and run
// a model that is `moe` with `engine` (the first replica's): runs of engine.data_parallel
// consecutive replicas. The largest CUDA-graph batch is vLLM's default capture size,
// min(max_num_seqs x (1 + speculative tokens) x 2, 512, max_num_batched_tokens)
// (vllm/config/vllm.py VllmConfig._set_cudagraph_sizes). None when lockstep is off or (auto) the
// model is dense, data_parallel is 1 or the group has fewer than data_parallel replicas (one rank
// standing for all). Errors (file:line:col) for `lockstep: true` without data_parallel > 1 and a
// count that is not a multiple of it.
std::vector<LockstepRanks> lockstep_groups(const ReplicaGroupConfig& g, bool moe,
                                           const EngineConfig& engine, size_t first);

// The cluster `policy` runs on: nullopt when the scenario has no `cluster:` (one replica, as
// before). Errors (file:line:col) for a malformed section, a policy `cluster:` without a
// scenario one, and keys other than `router` and `replicas` in a policy's `cluster:`.
std::optional<ClusterConfig> cluster_config(const ConfigNode& root, const ConfigNode& policy);

}  // namespace kvsim
