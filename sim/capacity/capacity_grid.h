// The scenario a capacity search's configurations and probes run: the scenario with a grid of
// values (--over's, or a search round's) as its sweep block. A copy of the scenario, it keeps the
// places its values were written, so a probe's error names the file's line:col, the --set, or the
// --over / --search that made the value (never "file:1:1", a copy's lost position).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/config_node.h"
#include "sim/capacity/capacity_search.h"

namespace kvsim {

// What wrote a configuration's or a probe's values: the scenario's marks (file positions, --set),
// and (key path, "--over KEY=..." / "--search KEY") for the values a grid wrote into it.
struct CapacityWritten {
  ConfigMarksPtr marks;
  std::vector<std::pair<std::string, std::string>> by;
};

// "--over KEY=a,b" (cut to 80 characters), or "--search KEY" for a search round's values.
std::string capacity_axis_label(const CapacityAxis& a, bool search);

// `base` (a copy of the scenario `w` describes) with `grid` (key -> values, in order) as its
// sweep block; no grid: the scenario alone, one point.
ConfigNode capacity_grid_scenario(const YAML::Node& base, const CapacityWritten& w,
                                  const std::vector<CapacityAxis>& grid, bool search);

}  // namespace kvsim
