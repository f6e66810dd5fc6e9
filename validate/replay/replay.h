// `kvsim-validate replay`: a scenario run through kvsim's own engine (the same scheduler,
// admission, KV store and preemption code as `kvsim run`) with each iteration's duration measured
// by a backend's real forward pass (forward_pass.h) instead of taken from the latency model.
// docs/fidelity.md, "End to end: a measured clock".
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "models/memory/gpu_memory_pool.h"
#include "sim/serving/iteration_clock.h"
#include "validate/replay/forward_pass.h"

namespace kvsim::validate {

struct ReplayOptions {
  std::filesystem::path scenario;
  std::string backend = "cpu";  // cpu | cuda (make_cpu_forward / make_cuda_forward)
  std::filesystem::path out_dir;
  std::filesystem::path profile;  // "" = the scenario's; else every policy's engine.profile
  int repeats = 1;                // ForwardSetup::repeats
  int threads = 1;
  uint64_t seed = 1;
  bool quiet = false;
  // Tests only: a clock maker used instead of the backend (e.g. one returning the modeled time).
  std::function<std::unique_ptr<IterationClock>(const ForwardSetup&)> clock_override;
};

// Runs the scenario through kvsim's engine with each iteration's time measured by the backend's
// forward pass. Writes the usual result files to out_dir (summary.json/.csv, requests.csv,
// timeseries.csv, manifest.json; the manifest and summary.json say "clock": "measured" and the
// backend/device) plus iterations.csv. Throws InputError for bad input.
void run_replay(const ReplayOptions& o);

// iterations.csv's header line (with its newline): one row per iteration, in simulated-time order
// per policy (a cluster's replicas interleaved by time).
inline constexpr const char* kIterationsHeader =
    "policy,replica,index,start_s,prefill_seqs,prefill_tokens,decode_seqs,decode_context_tokens,"
    "modeled_s,measured_s\n";

// The forward pass a replica's clock is built from: the pool's model (as the engine resolved
// its dtypes), the paged store's block size and block count. A store without blocks (contiguous,
// caching allocator) gets 16-token blocks covering its KV capacity: capacity bytes / KV bytes per
// token / 16, rounded down.
ForwardSetup forward_setup(const GpuMemoryPool& pool, const ReplayOptions& o);
// The `--set` assignments that give the scenario's engine and every policy's engine the latency
// profile at `profile` (a policy's own engine would otherwise override the scenario's); none
// when `profile` is empty. replay's --profile and e2e's modeled run use them.
std::vector<std::string> profile_sets(const ConfigNode& raw, const std::filesystem::path& profile);

}  // namespace kvsim::validate
