#include "sim/serving/offload/kv_offloading_config.h"

#include <fmt/format.h>

#include "core/config_node.h"
#include "models/model_spec.h"

namespace kvsim {

namespace {

// The tier keys its blocks by the prompt's prefix hashes and hands a loaded prefix to the
// scheduler through the GPU prefix cache (sim/serving/offload/offload_connector.h): it needs a
// paged store with enable_prefix_caching. vLLM itself can offload without prefix caching (the
// connector then loads into the request's own blocks); kvsim does not model that.
void check_store(const ConfigNode& engine, const ConfigNode& at) {
  const std::optional<ConfigNode> kv = engine.peek("kv");
  const auto type = kv && kv->is_map() ? kv->peek("type") : std::nullopt;
  const bool paged = !type || type->as<std::string>() == "paged";
  const auto apc = kv && kv->is_map() ? kv->peek("enable_prefix_caching") : std::nullopt;
  if (!paged || !apc || !apc->as<bool>()) {
    at.fail(
        "kv_offloading needs engine.kv {type: paged, enable_prefix_caching: true}: kvsim "
        "finds offloaded blocks by the prefix hashes of the GPU prefix cache");
  }
}

std::optional<DiskTierConfig> parse_disk_tier(const ConfigNode& offloading) {
  const std::optional<ConfigNode> node = offloading.optional_child("disk");
  if (!node || node->is_null()) return std::nullopt;
  const ConfigNode& n = *node;
  if (!n.is_map()) n.fail_expected("a disk tier section (a map)");
  DiskTierConfig d;
  d.size_gib = n.get<double>("size_gib", {.min = 1.0 / 1024, .max = 1e7});
  d.read_gb_per_s = n.get<double>("read_gb_per_s", d.read_gb_per_s, {.min = 1e-3, .max = 1e5});
  d.write_gb_per_s = n.get<double>("write_gb_per_s", d.write_gb_per_s, {.min = 1e-3, .max = 1e5});
  d.latency_us = n.get<double>("latency_us", d.latency_us, {.min = 0, .max = 1e9});
  n.reject_unknown_keys();
  return d;
}

}  // namespace

std::optional<KvOffloadingConfig> parse_kv_offloading(const ConfigNode& engine) {
  const std::optional<ConfigNode> node = engine.optional_child("kv_offloading");
  if (!node || node->is_null()) return std::nullopt;
  const ConfigNode& n = *node;
  if (!n.is_map()) n.fail_expected("a kv_offloading section (a map)");
  KvOffloadingConfig c;
  c.backend = n.get_enum("backend", {"native", "lmcache"}, std::string("native"));
  if (c.backend == "lmcache") {
    n.child("backend").fail(
        "backend lmcache is not modelled yet: use native (vLLM's "
        "OffloadingConnector)");
  }
  c.size_gib = n.get<double>("size_gib", {.min = 1.0 / 1024, .max = 1e6});
  c.block_size_multiple = n.get<int64_t>("block_size_multiple", 1, {.min = 1, .max = 4096});
  c.eviction_policy = n.get_enum("eviction_policy", {"lru", "arc"}, std::string("lru"));
  c.store_threshold = n.get<int64_t>("store_threshold", 0, {.min = 0, .max = 1000000});
  c.max_tracker_size = n.get<int64_t>("max_tracker_size", 64000, {.min = 1, .max = 1000000000});
  c.disk = parse_disk_tier(n);
  n.reject_unknown_keys();
  check_store(engine, n);
  return c;
}

void check_kv_offloading_model(const ConfigNode& engine, const ModelSpec& model) {
  const std::optional<ConfigNode> n = engine.is_map() ? engine.peek("kv_offloading") : std::nullopt;
  if (!n || n->is_null()) return;
  if (model.sliding_window.value_or(0) > 0 || model.hybrid()) {
    n->fail(
        fmt::format("kv_offloading is modelled for full attention only: {} has sliding-window "
                    "or chunked-attention layers, whose per-group offload (vLLM's "
                    "HybridOffloadPlanner) kvsim does not model",
                    model.name));
  }
}

}  // namespace kvsim
