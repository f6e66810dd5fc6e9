#include "sim/capacity/capacity_grid.h"

#include "core/echo_text.h"

namespace kvsim {

std::string capacity_axis_label(const CapacityAxis& a, bool search) {
  if (search) return "--search " + a.key;
  std::string text = a.text;
  if (text.empty()) {  // an axis made in code: its values as --over would list them
    text = a.key + "=";
    for (size_t i = 0; i < a.values.size(); ++i) text += (i ? "," : "") + a.values[i];
  }
  return "--over " + echo_text(text, 80);
}

ConfigNode capacity_grid_scenario(const YAML::Node& base, const CapacityWritten& w,
                                  const std::vector<CapacityAxis>& grid, bool search) {
  YAML::Node tree = YAML::Clone(base);
  YAML::Node g(YAML::NodeType::Map);
  std::vector<std::pair<std::string, std::string>> by = w.by;
  for (const CapacityAxis& a : grid) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (const std::string& v : a.values) list.push_back(YAML::Load(v));
    g[a.key] = list;
    // The list's own path: a sweep point's value takes the label of the list it came from.
    by.emplace_back("sweep.grid." + a.key, capacity_axis_label(a, search));
  }
  if (!grid.empty()) tree["sweep"]["grid"] = g;
  return ConfigNode::wrap_copy(tree, w.marks, std::move(by));
}

}  // namespace kvsim
