#include "sim/sweep/sweep_plan.h"

#include <fmt/format.h>

#include <cctype>

#include "core/check.h"
#include "core/config_patch.h"
#include "core/errors.h"
#include "sim/run/scenario_runner.h"

namespace kvsim {

namespace {

// An axis as read from the block: the list nodes, for positions and the values' text.
struct AxisLists {
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

std::vector<AxisLists> read_axes(const ConfigNode& sweep) {
  if (!sweep.is_map()) sweep.fail_expected("a map with `grid:` and/or `zip:`");
  std::vector<AxisLists> axes;
  if (auto grid = sweep.optional_child("grid")) {
    for (auto& [key, list] : read_lists(*grid)) {
      axes.push_back(AxisLists{.keys = {key}, .lists = {list}, .count = list.size()});
    }
  }
  if (auto zip = sweep.optional_child("zip")) {
    AxisLists axis;
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

// apply_set words its message for the command line ("--set 'k=v': ..."); a sweep's message
// already names the key by its position, so keep only the reason.
std::string set_failure_reason(const InputError& e) {
  std::string why = e.what();
  if (const size_t cut = why.find("': "); why.rfind("--set '", 0) == 0 && cut != std::string::npos)
    why = why.substr(cut + 3);
  return why;
}

}  // namespace

std::string yaml_value_text(const YAML::Node& value) {
  if (value.IsScalar()) return value.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << value;
  return e.c_str();
}

SweepPoints::SweepPoints(YAML::Node base, std::vector<Axis> axes, ConfigMarksPtr marks,
                         std::string source)
    : base_(std::move(base)),
      axes_(std::move(axes)),
      marks_(std::move(marks)),
      source_(std::move(source)),
      size_(1) {
  for (const Axis& a : axes_) size_ *= a.count;
  width_ = static_cast<int>(std::to_string(size_ - 1).size());
}

std::vector<size_t> SweepPoints::digits(size_t i) const {
  KVSIM_CHECK(i < size_, "sweep point {} of {}", i, size_);
  std::vector<size_t> d(axes_.size());
  for (size_t a = axes_.size(); a-- > 0;) {  // last axis fastest
    d[a] = i % axes_[a].count;
    i /= axes_[a].count;
  }
  return d;
}

std::vector<std::string> SweepPoints::values(size_t i) const {
  const std::vector<size_t> d = digits(i);
  std::vector<std::string> out;
  for (size_t a = 0; a < axes_.size(); ++a) {
    for (const auto& texts : axes_[a].texts) out.push_back(texts[d[a]]);
  }
  return out;
}

std::string SweepPoints::name(size_t i) const {
  if (axes_.empty()) return "0-base";
  const std::vector<size_t> d = digits(i);
  std::string slug;
  for (size_t a = 0; a < axes_.size(); ++a) {
    for (size_t k = 0; k < axes_[a].keys.size(); ++k) {
      if (!slug.empty()) slug += '_';
      slug += slug_part(axes_[a].keys[k], axes_[a].texts[k][d[a]]);
    }
  }
  if (slug.size() > 80) slug.resize(80);  // the index keeps names unique
  return fmt::format("{:0{}}-{}", i, width_, slug);
}

SweepPoint SweepPoints::build(size_t i) const {
  SweepPoint p{.index = i, .values = values(i), .name = name(i), .tree = YAML::Clone(base_)};
  const std::vector<size_t> d = digits(i);
  for (size_t a = 0; a < axes_.size(); ++a) {
    for (size_t k = 0; k < axes_[a].keys.size(); ++k) {
      const std::string& text = axes_[a].texts[k][d[a]];
      try {
        apply_set_in_place(p.tree, axes_[a].keys[k] + "=" + text);  // the tree is the point's own
      } catch (const InputError& e) {
        throw ConfigError(
            fmt::format("{}: value {}: {}", axes_[a].where[k], text, set_failure_reason(e)));
      }
    }
  }
  return p;
}

ConfigNode SweepPoints::config(const SweepPoint& p) const {
  if (!marks_) return ConfigNode::wrap(p.tree, source_);
  std::vector<std::pair<std::string, std::string>> written;
  const std::vector<size_t> d = digits(p.index);
  for (size_t a = 0; a < axes_.size(); ++a) {
    const Axis& axis = axes_[a];
    for (size_t k = 0; k < axis.keys.size(); ++k) {
      written.emplace_back(
          ConfigNode::key_path(axis.keys[k]),
          !axis.written_by[k].empty()
              ? axis.written_by[k]
              : fmt::format("{}:{}:{}", source_, axis.lines[k][d[a]], axis.columns[k][d[a]]));
    }
  }
  return ConfigNode::wrap_copy(p.tree, marks_, std::move(written));
}

SweepPoint SweepPoints::operator[](size_t i) const {
  if (auto it = edited_.find(i); it != edited_.end()) {
    const SweepPoint& held = it->second;
    // The caller's own tree, as for a built point (assigning to a YAML::Node would rebind the
    // held one too: nodes are references).
    return SweepPoint{.index = held.index,
                      .values = held.values,
                      .name = held.name,
                      .tree = YAML::Clone(held.tree)};
  }
  return build(i);
}

SweepPoint& SweepPoints::operator[](size_t i) {
  auto it = edited_.find(i);
  if (it == edited_.end()) it = edited_.emplace(i, build(i)).first;
  return it->second;
}

SweepPlan expand_sweep(const ConfigNode& root) {
  SweepPlan plan;
  plan.source = root.source();
  plan.scenario_hash = scenario_hash(root.yaml());
  if (!root.has("sweep")) {
    plan.points = SweepPoints(YAML::Clone(root.yaml()), {}, root.marks(), plan.source);
    return plan;
  }
  const std::vector<AxisLists> lists = read_axes(root.child("sweep"));
  // The base: a clone of the top level without `sweep:`, made from a map that shares the other
  // entries, so neither the base nor a step on the way copies the (possibly long) sweep lists.
  YAML::Node top(YAML::NodeType::Map);
  top.SetStyle(root.yaml().Style());
  top.SetTag(root.yaml().Tag());
  for (const auto& kv : root.yaml()) {
    if (kv.first.Scalar() != "sweep") top.force_insert(kv.first, kv.second);
  }
  const YAML::Node base = YAML::Clone(top);
  std::vector<SweepPoints::Axis> axes;
  size_t total = 1;
  for (const AxisLists& a : lists) {
    for (const auto& k : a.keys) plan.keys.push_back(k);
    plan.axes.push_back(a.keys);
    if (total > kMaxSweepPoints / a.count) {
      root.child("sweep").fail(fmt::format("more than {} points", kMaxSweepPoints));
    }
    total *= a.count;
    SweepPoints::Axis axis{.keys = a.keys, .texts = {}, .where = {}, .count = a.count};
    for (size_t k = 0; k < a.keys.size(); ++k) {
      const ConfigNode& list = a.lists[k];
      axis.where.push_back(list.path().empty() ? list.where()
                                               : fmt::format("{}: {}", list.where(), list.path()));
      axis.written_by.push_back(list.written_by().value_or(""));
      std::vector<std::string> texts;
      std::vector<int> lines, columns;
      texts.reserve(list.size());
      // Straight from the YAML list: ConfigNode::at would keep a child record per value.
      for (const YAML::Node& value : list.yaml()) {
        texts.push_back(yaml_value_text(value));
        // A value without a mark (a list the caller built) takes its list's position.
        lines.push_back(value.Mark().line >= 0 ? value.Mark().line + 1 : list.line());
        columns.push_back(value.Mark().line >= 0 ? value.Mark().column + 1 : 1);
        // Each value against the base scenario: a bad path fails here, before anything runs.
        try {
          apply_set(base, a.keys[k] + "=" + texts.back());
        } catch (const InputError& e) {
          list.fail(fmt::format("value {}: {}", texts.back(), set_failure_reason(e)));
        }
      }
      axis.texts.push_back(std::move(texts));
      axis.lines.push_back(std::move(lines));
      axis.columns.push_back(std::move(columns));
    }
    axes.push_back(std::move(axis));
  }
  plan.points = SweepPoints(base, std::move(axes), root.marks({"sweep"}), plan.source);
  return plan;
}

}  // namespace kvsim
