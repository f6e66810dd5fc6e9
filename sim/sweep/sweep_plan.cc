#include "sim/sweep/sweep_plan.h"

#include <fmt/format.h>

#include <cctype>

#include "core/config_patch.h"
#include "core/errors.h"

namespace kvsim {

namespace {

// One dimension of the product: `keys` advance together through `count` positions.
struct Axis {
  std::vector<std::string> keys;
  std::vector<ConfigNode> lists;  // one list node per key
  size_t count = 0;
};

// Reads `grid:` or `zip:` entries: every value must be a non-empty list.
std::vector<std::pair<std::string, ConfigNode>> read_lists(const ConfigNode& block) {
  if (!block.is_map() || block.size() == 0)
    block.fail_expected("a map of key paths to lists of values");
  std::vector<std::pair<std::string, ConfigNode>> out;
  for (const std::string& key : block.keys()) {
    const ConfigNode list = block.child(key);
    if (!list.is_sequence() || list.size() == 0) list.fail_expected("a non-empty list of values");
    if (key.empty() || key.front() == '.' || key.back() == '.' ||
        key.find("..") != std::string::npos) {
      list.fail(
          fmt::format("'{}' is not a key path (dotted keys and list indices, e.g. "
                      "engine.kv.block_size or policies.1.guards.0.safety_margin_gb)",
                      key));
    }
    if (key == "sweep" || key.rfind("sweep.", 0) == 0)
      list.fail("a sweep cannot sweep its own block");
    out.emplace_back(key, list);
  }
  return out;
}

std::vector<Axis> read_axes(const ConfigNode& sweep) {
  if (!sweep.is_map()) sweep.fail_expected("a map with `grid:` and/or `zip:`");
  std::vector<Axis> axes;
  if (auto grid = sweep.optional_child("grid")) {
    for (auto& [key, list] : read_lists(*grid)) {
      axes.push_back(Axis{.keys = {key}, .lists = {list}, .count = list.size()});
    }
  }
  if (auto zip = sweep.optional_child("zip")) {
    Axis axis;
    for (auto& [key, list] : read_lists(*zip)) {
      if (!axis.keys.empty() && list.size() != axis.count) {
        list.fail(fmt::format("zip lists must have one length: '{}' has {} values, '{}' has {}",
                              key, list.size(), axis.keys.front(), axis.count));
      }
      axis.keys.push_back(key);
      axis.lists.push_back(list);
      axis.count = list.size();
    }
    axes.push_back(std::move(axis));
  }
  sweep.reject_unknown_keys();
  if (axes.empty()) sweep.fail("expected `grid:` or `zip:` with at least one key");
  return axes;
}

// "safety_margin_gb=5" from the key's last path part; only characters safe in a folder name.
std::string slug_part(const std::string& key, const std::string& value) {
  const size_t dot = key.rfind('.');
  std::string raw = (dot == std::string::npos ? key : key.substr(dot + 1)) + "=" + value;
  std::string out;
  for (char c : raw) {
    const bool keep =
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '=' || c == '-' || c == '_';
    out += keep ? c : '_';
  }
  return out;
}

}  // namespace

std::string yaml_value_text(const YAML::Node& value) {
  if (value.IsScalar()) return value.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << value;
  return e.c_str();
}

SweepPlan expand_sweep(const ConfigNode& root) {
  SweepPlan plan;
  plan.source = root.source();
  YAML::Node base = YAML::Clone(root.yaml());
  plan.scenario = YAML::Clone(base);
  if (!root.has("sweep")) {
    plan.points.push_back(SweepPoint{.index = 0, .values = {}, .name = "0-base", .tree = base});
    return plan;
  }
  const std::vector<Axis> axes = read_axes(root.child("sweep"));
  base.remove("sweep");
  size_t total = 1;
  for (const Axis& a : axes) {
    for (const auto& k : a.keys) plan.keys.push_back(k);
    plan.axes.push_back(a.keys);
    if (total > kMaxSweepPoints / a.count) {
      root.child("sweep").fail(fmt::format("more than {} points", kMaxSweepPoints));
    }
    total *= a.count;
  }
  const int width = static_cast<int>(std::to_string(total - 1).size());
  plan.points.reserve(total);
  std::vector<size_t> pos(axes.size(), 0);  // mixed-radix counter, last axis fastest
  for (size_t index = 0; index < total; ++index) {
    SweepPoint p{.index = index, .values = {}, .name = "", .tree = base};
    std::string slug;
    for (size_t a = 0; a < axes.size(); ++a) {
      for (size_t k = 0; k < axes[a].keys.size(); ++k) {
        const ConfigNode value = axes[a].lists[k].at(pos[a]);
        const std::string text = yaml_value_text(value.yaml());
        const std::string& key = axes[a].keys[k];
        try {
          p.tree = apply_set(p.tree, key + "=" + text);
        } catch (const InputError& e) {
          // apply_set words its message for the command line ("--set 'k=v': ..."); here the
          // position already names the key, so keep only the reason.
          std::string why = e.what();
          if (const size_t cut = why.find("': ");
              why.rfind("--set '", 0) == 0 && cut != std::string::npos) {
            why = why.substr(cut + 3);
          }
          axes[a].lists[k].fail(fmt::format("value {}: {}", text, why));
        }
        p.values.push_back(text);
        if (!slug.empty()) slug += '_';
        slug += slug_part(key, text);
      }
    }
    if (slug.size() > 80) slug.resize(80);  // the index keeps names unique
    p.name = fmt::format("{:0{}}-{}", index, width, slug);
    plan.points.push_back(std::move(p));
    for (size_t a = axes.size(); a-- > 0;) {
      if (++pos[a] < axes[a].count) break;
      pos[a] = 0;
    }
  }
  return plan;
}

}  // namespace kvsim
