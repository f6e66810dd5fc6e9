#include "sim/capacity/capacity_cost.h"

#include "core/config_node.h"
#include "models/catalog.h"

namespace kvsim {

namespace {

// engine.<key> of the policy named `policy`, else of the scenario, else 1.
int engine_degree(const ConfigNode& root, const std::string& policy, const char* key) {
  int v = 1;
  if (auto e = root.optional_child("engine")) {
    if (auto n = e->optional_child(key)) v = n->as<int>({.min = 1, .max = 1 << 20});
  }
  if (auto ps = root.optional_child("policies"); ps && ps->is_sequence()) {
    for (size_t i = 0; i < ps->size(); ++i) {
      const ConfigNode p = ps->at(i);
      if (!p.is_map() || p.get<std::string>("name", "") != policy) continue;
      if (auto e = p.optional_child("engine")) {
        if (auto n = e->optional_child(key)) v = n->as<int>({.min = 1, .max = 1 << 20});
      }
    }
  }
  return v;
}

}  // namespace

ConfigCost config_cost(const YAML::Node& tree, const std::string& source,
                       const std::string& policy, const Catalog& catalog) {
  const ConfigNode root = ConfigNode::wrap(YAML::Clone(tree), source);
  ConfigCost c;
  const GpuSpec gpu = resolve_gpu(root.child("gpu"), catalog);
  c.gpu = gpu.name;
  c.gpu_hour_usd = gpu.gpu_hour_usd;
  c.price_source = gpu.price_source;
  c.tensor_parallel = engine_degree(root, policy, "tensor_parallel");
  c.pipeline_parallel = engine_degree(root, policy, "pipeline_parallel");
  if (auto cluster = root.optional_child("cluster")) {
    if (auto reps = cluster->optional_child("replicas"); reps && reps->is_sequence()) {
      c.replicas = 0;
      for (size_t i = 0; i < reps->size(); ++i) {
        c.replicas += reps->at(i).get<int>("count", 1, {.min = 0, .max = 1 << 20});
      }
    }
  }
  c.gpus = c.tensor_parallel * c.pipeline_parallel * c.replicas;
  if (auto cost = root.optional_child("cost")) {
    cost->allow({"gpu_hour_usd"});
    cost->reject_unknown_keys();
    if (auto prices = cost->optional_child("gpu_hour_usd")) {
      if (!prices->is_map()) prices->fail_expected("a map of GPU name to price per hour (USD)");
      if (auto p = prices->optional_child(c.gpu)) {
        c.gpu_hour_usd = p->as<double>({.min = 0, .max = 1e6});
        c.price_source = "scenario cost: block";
      }
    }
  }
  return c;
}

}  // namespace kvsim
