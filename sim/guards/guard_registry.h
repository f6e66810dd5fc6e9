// The guard registry: each entry of a policy's `guards:` list names one by `type:`. An entry
// carries the KV-store capabilities its guard needs (watermark: a paged store); make_guards()
// refuses a pairing with a store that lacks them, at the guard's `type:` position. Adding a guard
// takes one add() in register_guards() (register.cc) plus its make_ function (guard_makers.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/registry.h"
#include "models/memory/kv_capabilities.h"
#include "sim/guards/guard.h"

namespace kvsim {

struct GuardFactory {
  // The smallest valid configuration, e.g. "{type: max_inflight, max_inflight: 64}": the guard
  // with its documented defaults (docs, contract tests).
  std::string example;
  KvCapabilities needs;  // what the policy's KV store must provide
  std::function<std::unique_ptr<Guard>(const ConfigNode&, const ModelSpec&)> build;
};

using GuardRegistry = Registry<GuardFactory>;

// Adds every guard: kv_guard, reserve, watermark, max_model_len, max_inflight.
void register_guards(GuardRegistry& registry);
// The registry filled by register_guards(), built on first use.
const GuardRegistry& guard_registry();

// `type: none` in a guards list: a placeholder that adds no guard (accepted besides the registry's
// names, e.g. for a sweep axis that switches a guard off).
inline constexpr const char* kNoGuard = "none";

}  // namespace kvsim
