// What prepare_scenario() builds for each policy and simulate() uses up: the replicas (engine,
// memory pool, latency model, guards), a cluster's router and link, the workload, the SLO.
// Internal to sim/run/ (scenario_setup.cc builds it, scenario_runner.cc runs it).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/latency/latency_model.h"
#include "models/memory/gpu_memory_pool.h"
#include "sim/cluster/cluster.h"
#include "sim/cluster/cluster_config.h"
#include "sim/cluster/cluster_summary.h"
#include "sim/guards/guard.h"
#include "sim/metrics/slo.h"
#include "sim/serving/engine_config.h"
#include "workloads/workload.h"

namespace kvsim {

// One replica's engine, pool, latency model and guards.
struct PreparedReplica {
  ReplicaIdentity id;  // cluster runs only
  EngineConfig engine;
  std::unique_ptr<GpuMemoryPool> pool;
  std::unique_ptr<LatencyModel> latency;
  std::vector<std::unique_ptr<Guard>> guards;
  std::optional<GpuLayoutSummary> gpu_layout;  // more than one GPU or a dtype override
};

// One policy, ready to run: built by prepare_scenario(), used up by simulate().
struct PreparedPolicy {
  std::string name;
  std::vector<PreparedReplica> replicas;  // one without a `cluster:`
  std::unique_ptr<Router> router;         // cluster runs only
  KvTransfer kv_transfer;                 // cluster runs only: the prefill-to-decode link
  std::string router_type;
  std::vector<LockstepRanks> lockstep;  // cluster runs only: lockstep data-parallel groups
  std::string model, gpu;  // the policy's own `model:` / `gpu:` names ("" when it has none)
  Workload workload;
  std::optional<SloBounds> slo;  // the scenario's `slo:` with the policy's on top
};

}  // namespace kvsim
