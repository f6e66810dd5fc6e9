// The guard registry and make_guards(): `type:` -> constructor. Registered explicitly
// (static-initializer registration silently vanishes when a static library drops an unreferenced
// object file).
#include <fmt/format.h>

#include "core/config_node.h"
#include "models/memory/kv_store_registry.h"
#include "sim/guards/guard_makers.h"
#include "sim/guards/guard_registry.h"

namespace kvsim {

SimTime read_timeout(const ConfigNode& c) {
  const auto s = c.get_optional<double>("timeout_s", {.min = 0, .max = 1e9});
  return s ? seconds_to_sim(*s) : -1;
}

void register_guards(GuardRegistry& r) {
  r.add({"kv_guard",
         "seed A's guard: free memory (driver view) minus an estimate vs a margin",
         {"safety_margin_gb", "on_fail", "max_safe_len", "system_tokens", "num_layers", "num_heads",
          "head_dim", "dtype_bytes", "estimate_batch", "target", "max_gpu_memory_gb", "timeout_s"},
         {"{type: kv_guard}", {}, make_kv_guard}});
  r.add({"reserve",
         "admit only if every admitted request's worst case fits in the KV budget",
         {"on_fail", "timeout_s"},
         {"{type: reserve}", {}, make_reserve_guard}});
  r.add({"watermark",
         "vLLM's free-block watermark, checked by the scheduler at allocation (paged KV stores "
         "only)",
         {"watermark", "check_at", "timeout_s"},
         {"{type: watermark}", KvCapability::kPaged, make_watermark_guard}});
  r.add({"max_model_len",
         "length limit: reject or truncate prompt + output over it",
         {"max_model_len", "on_fail"},
         {"{type: max_model_len}", {}, make_max_model_len_guard}});
  r.add({"max_inflight",
         "concurrency limit: at most N admitted requests at once",
         {"max_inflight", "on_fail", "timeout_s"},
         {"{type: max_inflight, max_inflight: 64}", {}, make_max_inflight_guard}});
}

const GuardRegistry& guard_registry() {
  static const GuardRegistry registry = GuardRegistry::filled("guard", register_guards);
  return registry;
}

namespace {

// The policy's KV store must provide what the guard needs; else a ConfigError at `type:`.
void check_kv_capabilities(const ConfigNode& guard, const GuardRegistry::Entry& entry,
                           const std::string& kv_type) {
  const auto* store = kv_store_registry().find(kv_type);
  const KvCapabilities provided = store != nullptr ? store->make.provides : KvCapabilities{};
  if (provided.covers(entry.make.needs)) return;
  std::string needed;
  for (KvCapability c : kAllKvCapabilities) {
    if (entry.make.needs.has(c) && !provided.has(c)) {
      needed += std::string(needed.empty() ? "" : " and ") + std::string(kv_capability_name(c));
    }
  }
  guard.child("type").fail(
      fmt::format("the {} guard needs a {} KV store; this policy's "
                  "engine.kv.type is {}",
                  entry.name, needed, kv_type));
}

}  // namespace

std::vector<std::unique_ptr<Guard>> make_guards(const ConfigNode& list, const ModelSpec& model,
                                                const std::string& kv_type) {
  std::vector<std::unique_ptr<Guard>> out;
  if (list.is_null()) return out;
  if (!list.is_sequence()) list.fail_expected("a list of guards");
  std::vector<std::string> choices{kNoGuard};
  for (const auto& name : guard_registry().names()) choices.push_back(name);
  for (size_t i = 0; i < list.size(); ++i) {
    const ConfigNode g = list.at(i);
    const std::string type = g.get_enum("type", choices);
    if (type == kNoGuard) continue;
    const auto& entry = *guard_registry().find(type);
    g.allow(entry.keys);  // a typo's did-you-mean sees every key of the type
    check_kv_capabilities(g, entry, kv_type);
    out.push_back(entry.make.build(g, model));
  }
  return out;
}

}  // namespace kvsim
