// make_workload: the scenario's `workload:` node to what the engine replays. Exactly one of
//   arrivals: {type: poisson|gamma|fixed, rate: R[, cv: C]}   open loop
//   clients:  {type: closed_loop, count: N, think_s: T[, think: fixed|exponential, stagger_s: S]}
//   trace:    {path: ..., format: ..., window_s: [a, b], ...}   (see traces/trace_reader.h)
// With arrivals or clients: prompt_tokens, output_tokens (LengthDist), duration_s and/or
// max_requests, and optional bursts: [{at_s, count, prompt_tokens, output_tokens[, over_s]}].
// The schema, with examples, is in docs/workloads.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "core/registry.h"
#include "workloads/generators/closed_loop.h"
#include "workloads/request_spec.h"
#include "workloads/traces/trace_reader.h"

namespace kvsim {

class ConfigNode;

struct Workload {
  enum class Kind { kOpenLoop, kClosedLoop, kTrace };
  Kind kind = Kind::kOpenLoop;
  // Open loop and traces: the whole stream. Closed loop: the injected bursts only, or null when
  // there are none (the engine then merges it with the clients' requests by time).
  std::unique_ptr<WorkloadSource> source;
  std::unique_ptr<ClosedLoopClients> clients;           // closed loop only
  std::shared_ptr<const TraceCounters> trace_counters;  // traces only: skipped rows etc.
};

// Builds the workload; the randomness comes from `seed` alone (std::mt19937_64 sub-streams and
// hand-written samplers), so the same node and seed give the same requests everywhere. Throws
// ConfigError (file:line:col) for a bad node and InputError for an unreadable trace. Unknown
// keys under `workload_node` are errors.
Workload make_workload(const ConfigNode& workload_node, uint64_t seed);

// The workload kinds, chosen by which one key of `workload:` is present (arrivals, clients or
// trace); an entry's keys are the `workload:` keys that kind accepts.
using WorkloadKindFactory = std::function<Workload(const ConfigNode& workload_node, uint64_t seed)>;
using WorkloadKindRegistry = Registry<WorkloadKindFactory>;
void register_workload_kinds(WorkloadKindRegistry& registry);
const WorkloadKindRegistry& workload_kind_registry();

}  // namespace kvsim
