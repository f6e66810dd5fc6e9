#include "sim/capacity/capacity_cost.h"

#include <algorithm>
#include <optional>

#include "core/config_node.h"
#include "models/catalog.h"
#include "sim/cluster/cluster_config.h"

namespace kvsim {

namespace {

// `key` of the first of `layers` (highest first) that sets it, else 1: the run merges engine
// maps the same way (a group's over the policy's over the scenario's).
int engine_degree(const std::vector<std::optional<ConfigNode>>& layers, const char* key) {
  for (const auto& e : layers) {
    if (!e || !e->is_map()) continue;
    if (auto n = e->optional_child(key)) return n->as<int>({.min = 1, .max = 1 << 20});
  }
  return 1;
}

// The policy named `name` (an empty map when none is).
ConfigNode find_policy(const ConfigNode& root, const std::string& name) {
  if (auto ps = root.optional_child("policies"); ps && ps->is_sequence()) {
    for (size_t i = 0; i < ps->size(); ++i) {
      const ConfigNode p = ps->at(i);
      if (p.is_map() && p.get<std::string>("name", "") == name) return p;
    }
  }
  return ConfigNode::parse_string("{}", "no policy");
}

}  // namespace

ConfigCost config_cost(const YAML::Node& tree, const std::string& source,
                       const std::string& policy_name, const Catalog& catalog) {
  return config_cost(ConfigNode::wrap(YAML::Clone(tree), source), policy_name, catalog);
}

ConfigCost config_cost(const ConfigNode& root, const std::string& policy_name,
                       const Catalog& catalog) {
  const ConfigNode policy = find_policy(root, policy_name);
  // Prices the scenario's `cost:` block sets, by GPU name.
  std::optional<ConfigNode> prices;
  if (auto cost = root.optional_child("cost")) {
    cost->allow({"gpu_hour_usd"});
    cost->reject_unknown_keys();
    prices = cost->optional_child("gpu_hour_usd");
    if (prices && !prices->is_map())
      prices->fail_expected("a map of GPU name to price per hour (USD)");
  }
  auto price = [&](GroupCost& g, const GpuSpec& gpu) {
    g.gpu = gpu.name;
    g.gpu_hour_usd = gpu.gpu_hour_usd;
    g.price_source = gpu.price_source;
    if (prices) {
      if (auto p = prices->optional_child(gpu.name)) {
        g.gpu_hour_usd = p->as<double>({.min = 0, .max = 1e6});
        g.price_source = "scenario cost: block";
      }
    }
  };
  const std::optional<ConfigNode> scenario_engine = root.optional_child("engine");
  const std::optional<ConfigNode> policy_engine = policy.peek("engine");
  const std::optional<ConfigNode> policy_gpu = policy.peek("gpu");
  const GpuSpec base_gpu = resolve_gpu(policy_gpu ? *policy_gpu : root.child("gpu"), catalog);

  ConfigCost c;
  const std::optional<ClusterConfig> cluster = cluster_config(root, policy);
  if (!cluster) {
    GroupCost g;
    g.tensor_parallel = engine_degree({policy_engine, scenario_engine}, "tensor_parallel");
    g.pipeline_parallel = engine_degree({policy_engine, scenario_engine}, "pipeline_parallel");
    price(g, base_gpu);
    c.groups.push_back(std::move(g));
  } else {
    for (const ReplicaGroupConfig& rg : cluster->groups) {
      GroupCost g;
      g.group = rg.name;
      g.count = rg.count;
      g.tensor_parallel =
          engine_degree({rg.engine, policy_engine, scenario_engine}, "tensor_parallel");
      g.pipeline_parallel =
          engine_degree({rg.engine, policy_engine, scenario_engine}, "pipeline_parallel");
      price(g, rg.gpu ? resolve_gpu(*rg.gpu, catalog) : base_gpu);
      c.groups.push_back(std::move(g));
    }
  }
  c.replicas = 0;
  c.gpus = 0;
  bool priced = true;
  std::vector<std::string> names;  // the GPUs named so far
  const GroupCost& first = c.groups.front();
  c.tensor_parallel = first.tensor_parallel;
  c.pipeline_parallel = first.pipeline_parallel;
  c.gpu_hour_usd = first.gpu_hour_usd;
  c.price_source = first.price_source;
  for (GroupCost& g : c.groups) {
    g.gpus = g.count * g.tensor_parallel * g.pipeline_parallel;
    c.replicas += g.count;
    c.gpus += g.gpus;
    priced = priced && g.gpu_hour_usd > 0;
    c.total_usd_per_hour += g.gpus * g.gpu_hour_usd;
    if (std::find(names.begin(), names.end(), g.gpu) == names.end()) {
      if (!names.empty()) c.gpu += '+';
      c.gpu += g.gpu;
      names.push_back(g.gpu);
    }
    if (g.tensor_parallel != c.tensor_parallel) c.tensor_parallel = 0;
    if (g.pipeline_parallel != c.pipeline_parallel) c.pipeline_parallel = 0;
    if (g.gpu_hour_usd != c.gpu_hour_usd) c.gpu_hour_usd = 0;
    if (g.price_source != c.price_source) c.price_source = "per replica group";
  }
  if (!priced) c.total_usd_per_hour = 0;
  return c;
}

}  // namespace kvsim
