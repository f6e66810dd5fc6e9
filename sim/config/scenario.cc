#include "sim/config/scenario.h"

#include <fmt/format.h>

#include "core/config_patch.h"
#include "core/errors.h"
#include "core/units.h"
#include "models/catalog.h"
#include "models/memory/kv_store_registry.h"
#include "workloads/traces/trace_formats.h"
#include "workloads/traces/trace_reader.h"

namespace kvsim {

ModelSpec load_model_node(const ConfigNode& node, const Catalog& catalog) {
  ModelSpec m = resolve_model(node, catalog);
  // Byte arithmetic downstream (pools, guards, OOM reports) multiplies token counts up to
  // max_position by the KV bytes per token in int64; bound the product here, at load time, with
  // room for block rounding and sums (real models need under 1e11 bytes).
  const auto longest_kv = checked_mul(m.kv_bytes_per_token(), m.max_position);
  if (!longest_kv || *longest_kv > kMaxSequenceKvBytes) {
    node.fail(fmt::format(
        "model '{}': one max_position sequence ({} tokens x {} KV bytes/token) needs more than "
        "1e18 bytes of KV; lower max_position or the model's size",
        m.name, m.max_position, m.kv_bytes_per_token()));
  }
  return m;
}

Scenario load_scenario(const ConfigNode& root, const Catalog& catalog) {
  if (!root.is_map()) root.fail_expected("a scenario (a YAML map)");
  // Declare every top-level key first, so a typo is reported as a typo ("did you mean
  // 'model'?") rather than as the required key it shadows being missing.
  root.allow({"name", "description", "seed", "model", "gpu"});
  root.allow(kScenarioSections);
  root.reject_unknown_keys();
  Scenario s{.root = root};
  s.name = root.get<std::string>("name");
  s.description = root.get<std::string>("description", "");
  s.seed = static_cast<uint64_t>(root.get<int64_t>("seed", 0, {.min = 0, .max = 9.0e15}));
  s.model = load_model_node(root.child("model"), catalog);
  s.gpu = resolve_gpu(root.child("gpu"), catalog);
  s.catalog = &catalog;
  root.reject_unknown_keys();
  return s;
}

Scenario load_scenario_file(const std::filesystem::path& path, const Catalog& catalog) {
  return load_scenario(ConfigNode::parse_file(path), catalog);
}

Scenario load_scenario_with_sets(const ConfigNode& raw, const std::vector<std::string>& sets,
                                 const Catalog& catalog) {
  if (sets.empty()) return load_scenario(raw, catalog);
  YAML::Node patched = raw.yaml();  // raw's own tree: patched in place, keeping its positions
  for (const auto& s : sets) apply_set_in_place(patched, s);
  return load_scenario(ConfigNode::wrap_with_sets(patched, raw.source(), sets), catalog);
}

namespace {

// Lints read the raw YAML (they must not mark keys as known: the engine's own loader does that).
std::string where(const std::string& source, const YAML::Node& n) {
  return fmt::format("{}:{}:{}", source, n.Mark().line + 1, n.Mark().column + 1);
}

// yaml-cpp throws when indexing into a missing node; lints only want "absent".
YAML::Node lookup(const YAML::Node& n, const char* key) {
  if (!n.IsDefined() || !n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& kv : n) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return kv.second;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// The largest token count a length spec can produce: `value`, `max`, or a bare number.
int64_t max_tokens(const YAML::Node& spec) {
  int64_t best = 0;
  if (!spec.IsDefined()) return 0;
  if (spec.IsScalar()) {
    int64_t v = 0;
    return YAML::convert<int64_t>::decode(spec, v) ? v : 0;
  }
  if (spec.IsMap()) {
    for (const char* key : {"value", "max", "high"}) {
      int64_t v = 0;
      const YAML::Node x = lookup(spec, key);
      if (x.IsDefined() && YAML::convert<int64_t>::decode(x, v)) best = std::max(best, v);
    }
    const YAML::Node components = lookup(spec, "components");
    if (components.IsSequence()) {
      for (const auto& c : components) best = std::max(best, max_tokens(c));
    }
  }
  return best;
}

// A policy's `engine.kv`: its own `engine:` override replaces the scenario's whole `kv:` (a
// shallow merge, as the engine reads it); absent in both, the default store (paged).
YAML::Node policy_kv(const YAML::Node& root, const YAML::Node& policy) {
  const YAML::Node own = lookup(lookup(policy, "engine"), "kv");
  return own.IsDefined() ? own : lookup(lookup(root, "engine"), "kv");
}

std::string kv_type(const YAML::Node& kv) {
  const YAML::Node type = lookup(kv, "type");
  return type.IsScalar() ? type.Scalar() : std::string("paged");
}

// Whether the workload's requests carry prefix-block hashes: only traces whose format has them
// (named, or recognised from the first line as a run does). The run already checked the trace.
bool workload_has_prefix_hashes(const YAML::Node& root, const std::string& source) {
  const YAML::Node trace = lookup(lookup(root, "workload"), "trace");
  if (!trace.IsDefined()) return false;  // generated traffic: no hashes
  std::string format = "auto";
  if (const YAML::Node f = lookup(trace, "format"); f.IsScalar()) format = f.Scalar();
  if (format == "auto") {
    const YAML::Node path = lookup(trace, "path");
    if (!path.IsScalar()) return false;
    std::filesystem::path p(path.Scalar());
    if (p.is_relative()) p = std::filesystem::path(source).parent_path() / p;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p, ec)) return false;  // the run reports it
    try {
      format = detect_trace_format(p.string());
    } catch (const std::exception&) {
      return false;  // unreadable: the run reports it
    }
  }
  const auto* entry = trace_format_registry().find(format);
  return entry != nullptr && entry->make.prefix_hashes;
}

}  // namespace

std::vector<std::string> lint_scenario(const Scenario& s) {
  std::vector<std::string> out;
  const YAML::Node& root = s.root.yaml();
  const std::string& src = s.root.source();

  const YAML::Node block_size = lookup(lookup(lookup(root, "engine"), "kv"), "block_size");
  if (block_size.IsDefined()) {
    int64_t bs = 0;
    if (YAML::convert<int64_t>::decode(block_size, bs) && bs % 16 != 0) {
      out.push_back(fmt::format(
          "{}: engine.kv.block_size {} is not a multiple of 16 (seed B's alignment rule; "
          "measure it with kvsim-validate rather than trust it)",
          where(src, block_size), bs));
    }
  }

  const YAML::Node prompts = lookup(lookup(root, "workload"), "prompt_tokens");
  const int64_t longest = max_tokens(prompts);
  if (s.model.attention_kind() == "MHA" && s.model.param_count() > 5'000'000'000 &&
      longest >= 8192) {
    out.push_back(fmt::format(
        "{}: MHA model '{}' ({:.1f} B params) with {}-token prompts: seed B's rule prefers GQA/MQA "
        "above 5B parameters at 8k+ context (KV is {} bytes/token)",
        where(src, prompts), s.model.name, static_cast<double>(s.model.param_count()) / 1e9,
        longest, s.model.kv_bytes_per_token()));
  }

  for (const std::string& feature : s.model.unmodelled_features()) {
    out.push_back(fmt::format("{}: model '{}': {}", where(src, lookup(root, "model")), s.model.name,
                              feature));
  }

  const bool has_hashes = workload_has_prefix_hashes(root, src);
  const YAML::Node policies = lookup(root, "policies");
  if (policies.IsSequence()) {
    for (size_t p = 0; p < policies.size(); ++p) {
      const YAML::Node kv = policy_kv(root, policies[p]);
      const YAML::Node prefix = lookup(kv, "enable_prefix_caching");
      bool caching = false;
      if (prefix.IsDefined() && YAML::convert<bool>::decode(prefix, caching) && caching &&
          !has_hashes) {
        out.push_back(fmt::format(
            "{}: policies[{}]: prefix caching is on but the workload carries no prefix hashes "
            "(only traces with prefix-block hashes do, e.g. format mooncake): no request can hit "
            "the cache",
            where(src, prefix), p));
      }
      const auto* store = kv_store_registry().find(kv_type(kv));
      const bool preallocated =
          store != nullptr && store->make.provides.has(KvCapability::kPreallocatedPool);
      const YAML::Node guards = lookup(policies[p], "guards");
      if (!guards.IsSequence()) continue;
      for (size_t g = 0; g < guards.size(); ++g) {
        const YAML::Node type = lookup(guards[g], "type");
        if (!preallocated || !type.IsScalar() || type.Scalar() != "kv_guard") continue;
        // The guard compares its estimate with the driver's free memory, which a preallocated KV
        // pool has already taken: it sees only what lies outside the pool.
        out.push_back(fmt::format(
            "{}: policies[{}].guards[{}]: kv_guard on the {} store, which preallocates its KV "
            "pool: the free memory it checks lies outside the pool, so it admits only prompts "
            "that fit there, however empty the pool is",
            where(src, guards[g]), p, g, kv_type(kv)));
      }
      for (size_t g = 0; g < guards.size(); ++g) {
        const YAML::Node guard = guards[g];
        const YAML::Node type = lookup(guard, "type");
        if (!type.IsScalar() || type.Scalar() != "kv_guard") continue;
        auto dim = [&](const char* key, int64_t seed_default) {
          int64_t v = seed_default;
          if (const YAML::Node x = lookup(guard, key); x.IsDefined())
            YAML::convert<int64_t>::decode(x, v);
          return v;
        };
        const int64_t layers = dim("num_layers", 32), heads = dim("num_heads", 32),
                      head_dim = dim("head_dim", 128);
        if (layers != s.model.layers || heads != s.model.kv_heads || head_dim != s.model.head_dim) {
          out.push_back(fmt::format(
              "{}: policies[{}].guards[{}]: kv_guard assumes {} layers x {} KV heads x head dim {} "
              "but model '{}' has {} x {} x {}: its estimate is off by {:.2f}x",
              where(src, guard), p, g, layers, heads, head_dim, s.model.name, s.model.layers,
              s.model.kv_heads, s.model.head_dim,
              // In doubles: the guard's raw YAML figures are unchecked here and their int64
              // product can overflow (signed overflow: undefined behaviour).
              static_cast<double>(layers) * static_cast<double>(heads) *
                  static_cast<double>(head_dim) /
                  (static_cast<double>(s.model.layers) * s.model.kv_heads * s.model.head_dim)));
        }
      }
    }
  }
  return out;
}

}  // namespace kvsim
