// What a configuration costs per hour (capacity search, docs/capacity.md):
//   GPUs = tensor_parallel x pipeline_parallel (the policy's engine over the scenario's) x
//          replicas (the sum of cluster.replicas[*].count; 1 without a `cluster:` block)
//   cost = GPUs x the GPU's price per hour: the scenario's `cost: {gpu_hour_usd: {NAME: X}}`,
//          else the catalog's gpu_hour_usd (an inline GPU may give its own), else unknown (0).
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

namespace kvsim {

class Catalog;

struct ConfigCost {
  std::string gpu;            // the GPU's catalog (or inline) name
  int tensor_parallel = 1, pipeline_parallel = 1, replicas = 1;
  int gpus = 1;
  double gpu_hour_usd = 0;    // 0: no price known
  std::string price_source;   // "scenario cost: block", or the catalog's price_source
  double cost_per_hour_usd() const { return gpus * gpu_hour_usd; }
};

// `tree` is a whole scenario (a sweep or search point); `policy` names the policy whose engine
// counts. Throws ConfigError (file:line:col) for a bad `cost:` block or GPU.
ConfigCost config_cost(const YAML::Node& tree, const std::string& source,
                       const std::string& policy, const Catalog& catalog);

}  // namespace kvsim
