#include "sim/config/scenario.h"

#include <fmt/format.h>

#include "models/catalog.h"
#include "core/errors.h"
#include "core/units.h"

namespace kvsim {

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
  s.model = resolve_model(root.child("model"), catalog);
  // Byte arithmetic downstream (pools, guards, OOM reports) multiplies token counts up to
  // max_position by the KV bytes per token in int64; bound the product here, at load time, with
  // room for block rounding and sums (real models need under 1e11 bytes).
  const auto longest_kv = checked_mul(s.model.kv_bytes_per_token(), s.model.max_position);
  if (!longest_kv || *longest_kv > kMaxSequenceKvBytes) {
    root.child("model").fail(fmt::format(
        "model '{}': one max_position sequence ({} tokens x {} KV bytes/token) needs more than "
        "1e18 bytes of KV; lower max_position or the model's size",
        s.model.name, s.model.max_position, s.model.kv_bytes_per_token()));
  }
  s.gpu = resolve_gpu(root.child("gpu"), catalog);
  root.reject_unknown_keys();
  return s;
}

Scenario load_scenario_file(const std::filesystem::path& path, const Catalog& catalog) {
  return load_scenario(ConfigNode::parse_file(path), catalog);
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
  if (s.model.attention_kind() == "MHA" && s.model.param_count() > 5'000'000'000 && longest >= 8192) {
    out.push_back(fmt::format(
        "{}: MHA model '{}' ({:.1f} B params) with {}-token prompts: seed B's rule prefers GQA/MQA "
        "above 5B parameters at 8k+ context (KV is {} bytes/token)",
        where(src, prompts), s.model.name,
        static_cast<double>(s.model.param_count()) / 1e9, longest, s.model.kv_bytes_per_token()));
  }

  const YAML::Node policies = lookup(root, "policies");
  if (policies.IsSequence()) {
    for (size_t p = 0; p < policies.size(); ++p) {
      const YAML::Node guards = lookup(policies[p], "guards");
      if (!guards.IsSequence()) continue;
      for (size_t g = 0; g < guards.size(); ++g) {
        const YAML::Node guard = guards[g];
        const YAML::Node type = lookup(guard, "type");
        if (!type.IsScalar() || type.Scalar() != "kv_guard") continue;
        auto dim = [&](const char* key, int64_t seed_default) {
          int64_t v = seed_default;
          if (const YAML::Node x = lookup(guard, key); x.IsDefined()) YAML::convert<int64_t>::decode(x, v);
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
