// A scenario's `sweep:` block expanded into points. `grid:` maps dotted key paths to lists of
// values and takes their cartesian product (the first key varies slowest); `zip:` maps key
// paths to lists of one common length that advance together, as one more axis after the grid's.
// Each point is the base scenario with its values applied through apply_set and the `sweep:`
// block removed, so a point folder holds an ordinary scenario that `kvsim run` reproduces.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>
#include <vector>

#include "core/config_node.h"

namespace kvsim {

struct SweepPoint {
  size_t index = 0;
  std::vector<std::string> values;  // YAML text of each swept key's value, in SweepPlan::keys order
  std::string name;                 // folder name under points/: "<index>-<slug>"
  YAML::Node tree;                  // the point's whole scenario
};

struct SweepPlan {
  std::string source;             // the scenario file, for messages and relative paths
  std::vector<std::string> keys;  // swept key paths, grid keys first, then zip keys
  // The axes of the product, each the keys that advance together: one per grid key, then all
  // the zip keys as one. Flattened, they are `keys`.
  std::vector<std::vector<std::string>> axes;
  YAML::Node scenario;  // the scenario as given (--set applied, `sweep:` block included)
  std::vector<SweepPoint> points;
};

// A sweep grows multiplicatively; past this many points a typo is likelier than intent.
constexpr size_t kMaxSweepPoints = 1'000'000;

// Expands `root` (a scenario with --set already applied). A scenario without `sweep:` is one
// point with no keys. Throws ConfigError (file:line:col) for a malformed block, a path whose
// parent does not exist in the scenario, an index past the end of a list, zip lists of unequal
// length, or too many points.
SweepPlan expand_sweep(const ConfigNode& root);

// Text of a YAML value as it goes into `key=value` and summary.csv: a scalar as written, anything
// else in flow style.
std::string yaml_value_text(const YAML::Node& value);

}  // namespace kvsim
