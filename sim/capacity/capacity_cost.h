// What a configuration costs per hour (capacity search, docs/capacity.md): the GPUs a policy
// runs on, summed over every replica group, each group priced on its own GPU.
//   a group's GPUs = count x tensor_parallel x pipeline_parallel, its parallelism the group's
//                    own `engine:` over the policy's over the scenario's (as the run merges them)
//   its GPU        = the group's `gpu:`, else the policy's, else the scenario's
//   groups         = the policy's `cluster.replicas`, else the scenario's, else one replica
//   cost           = sum over groups of GPUs x the GPU's price per hour: the scenario's
//                    `cost: {gpu_hour_usd: {NAME: X}}`, else the catalog's gpu_hour_usd (an
//                    inline GPU may give its own), else unknown (0, and so is the total).
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/config_node.h"

namespace kvsim {

class Catalog;

// One replica group as it is priced.
struct GroupCost {
  std::string group;  // "" without a `cluster:`
  std::string gpu;    // the GPU's catalog (or inline) name
  int count = 1;
  int tensor_parallel = 1, pipeline_parallel = 1;
  int gpus = 1;              // count x tensor_parallel x pipeline_parallel
  double gpu_hour_usd = 0;   // 0: no price known
  std::string price_source;  // "scenario cost: block", or the catalog's price_source
};

struct ConfigCost {
  std::vector<GroupCost> groups;
  // Summaries of `groups`: the GPU names joined by '+' (in group order, each once); the
  // parallelism and price when every group shares it (else 0: mixed); the replicas and GPUs
  // summed; the price source when every group shares it.
  std::string gpu;
  int tensor_parallel = 1, pipeline_parallel = 1, replicas = 1;
  int gpus = 1;
  double gpu_hour_usd = 0;  // 0: no price known, or groups priced differently
  std::string price_source;
  double total_usd_per_hour = 0;  // 0: some group's price is unknown
  double cost_per_hour_usd() const { return total_usd_per_hour; }
  // Every group has a price. An unpriced configuration is not free: it stays out of "cheapest"
  // and the Pareto front.
  bool priced() const { return total_usd_per_hour > 0; }
};

// `root` is a whole scenario (a sweep or search point, wrapped with the scenario's marks so that
// its errors name where each value was written); `policy` names the policy whose engine, GPU and
// cluster count (a name no policy has: the scenario's own settings). Throws ConfigError
// (file:line:col, or the --set/--over that wrote the value) for a bad `cost:` block, GPU or
// cluster section.
ConfigCost config_cost(const ConfigNode& root, const std::string& policy, const Catalog& catalog);
// The same for a tree read from `source` without marks (errors then name only the key path).
ConfigCost config_cost(const YAML::Node& tree, const std::string& source, const std::string& policy,
                       const Catalog& catalog);

}  // namespace kvsim
