// A cluster policy's results: the totals (the policy's own figures, as for one replica) and one
// ReplicaSummary per replica, all from the replicas' own recorders (docs/cluster.md).
#pragma once

#include <string>
#include <vector>

#include "sim/metrics/recorder.h"

namespace kvsim {

struct ReplicaIdentity {
  std::string label, group, gpu, role;
  int index = 0;
  int gpus = 1;       // tensor_parallel x pipeline_parallel of its engine
  std::string model;  // its group's own `model:` ("" when it runs the policy's)
};

// `totals`: the cluster recorder's summary (outcomes, latencies, SLO and tokens over every
// request). Adds what only the replicas know: OOMs, restarts, preemptions, iterations and prefix
// lookups summed; the memory figures of the replica with the highest in-use peak (the first on
// ties), since memory is per GPU and a sum over GPUs means nothing to any one of them; the
// batch block's busy share and MFU as the replicas' GPU-time-weighted means (BatchSummary; its
// distributions and busy_s come merged from the replicas' recorders, Recorder::merge_batches_of).
void fold_replicas(PolicySummary& totals, const std::vector<PolicySummary>& replicas,
                   const std::vector<ReplicaIdentity>& identities, std::string router);

}  // namespace kvsim
