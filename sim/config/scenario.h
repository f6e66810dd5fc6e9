// A scenario file: what model, on what GPU, under what traffic and policies. This header holds the
// parsed form; scenario.cc reads and validates it from YAML.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "models/gpu_spec.h"
#include "models/model_spec.h"

namespace kvsim {

class Catalog;

struct Scenario {
  std::string name;
  std::string description;
  uint64_t seed = 0;
  ModelSpec model;
  GpuSpec gpu;
  ConfigNode root;  // the whole (patched) document, for the sections the engine reads
  // The catalog it was loaded with (a cluster's replica groups name their GPUs in it); null:
  // Catalog::builtin(). Borrowed.
  const Catalog* catalog = nullptr;
};

// Sections the engine, workload, policy and metrics code read from `root`. Listed here so the
// loader can accept them at the top level. `slo` is read per policy (sim/metrics/slo.h);
// `cluster` per policy too (sim/cluster/cluster_config.h); `cost` only by `kvsim capacity`
// (sim/capacity/capacity_cost.h).
inline const std::vector<std::string> kScenarioSections = {
    "engine", "workload", "policies", "sweep", "slo", "cluster", "cost"};

// The most KV bytes one sequence of the model's max_position tokens may need (1 EB): keeps every
// byte figure the engine derives from token counts far inside int64.
inline constexpr int64_t kMaxSequenceKvBytes = 1'000'000'000'000'000'000;

// A `model:` node (a catalog name, a model file or an inline spec: the scenario's, a policy's or
// a replica group's), with its KV bytes bounded (kMaxSequenceKvBytes). Throws ConfigError.
ModelSpec load_model_node(const ConfigNode& node, const Catalog& catalog);

// Reads and validates the scenario's top level. Throws ConfigError with file:line:col.
Scenario load_scenario(const ConfigNode& root, const Catalog& catalog);
Scenario load_scenario_file(const std::filesystem::path& path, const Catalog& catalog);
// The scenario `raw` (a parsed file or text) with every `--set path=value` applied first, in
// order (core/config_patch.h): what `kvsim run` and the Python module's kvsim.run() load. The
// sets patch raw's own tree (so every value keeps its file position); an error in a value a --set
// wrote names the --set and the key.
Scenario load_scenario_with_sets(const ConfigNode& raw, const std::vector<std::string>& sets,
                                 const Catalog& catalog);

// Warnings about settings that are legal but probably unwise (seed B's rules and seed A's
// guard assumptions). Each is one line naming the position.
std::vector<std::string> lint_scenario(const Scenario& s);

}  // namespace kvsim
