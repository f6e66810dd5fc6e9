// A scenario's `sweep:` block expanded into points. `grid:` maps dotted key paths to lists of
// values and takes their cartesian product (the first key varies slowest); `zip:` maps key
// paths to lists of one common length that advance together, as one more axis after the grid's.
// Each point is the base scenario with its values applied through apply_set and the `sweep:`
// block removed, so a point folder holds an ordinary scenario that `kvsim run` reproduces.
//
// Points are built on demand: the plan holds the base scenario (without its `sweep:` block) and
// each axis's values as YAML text, and point i is decoded from its index (a mixed-radix number,
// last axis fastest; a zip axis uses one digit for all its keys). A million-point sweep therefore
// costs the memory of its axis values, not of a million scenario trees.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "core/config_node.h"

namespace kvsim {

struct SweepPoint {
  size_t index = 0;
  std::vector<std::string> values;  // YAML text of each swept key's value, in SweepPlan::keys order
  std::string name;                 // folder name under points/: "<index>-<slug>"
  YAML::Node tree;                  // the point's whole scenario (a tree of its own)
};

// The points of a plan, each built when asked for. Read-only use (a const plan, as run_sweep
// sees it) keeps nothing per point.
class SweepPoints {
 public:
  // One dimension of the product: `keys` advance together through the same position of each of
  // their lists.
  struct Axis {
    std::vector<std::string> keys;
    std::vector<std::vector<std::string>> texts;  // per key, its values' YAML text
    std::vector<std::string> where;  // per key, "<file:line:col>: <path>" of its list, for errors
    size_t count = 0;
    // Per key, what a point's error in one of its values names: the list's --set (or the
    // capacity search's label) when one wrote it, else (empty) each value's own file:line:col,
    // kept in `lines`/`columns` (per key, per value).
    std::vector<std::string> written_by;
    std::vector<std::vector<int>> lines, columns;
  };

  SweepPoints() = default;
  // `marks`: where the base scenario's values were written (ConfigNode::marks()); `source`: the
  // scenario file the sweep lists are in.
  SweepPoints(YAML::Node base, std::vector<Axis> axes, ConfigMarksPtr marks, std::string source);

  size_t size() const { return size_; }
  // Point i: its values, name and tree. Throws ConfigError at the value's list when a value
  // cannot be applied at point i (e.g. an earlier key's value made a later key's path a scalar).
  SweepPoint operator[](size_t i) const;
  SweepPoint at(size_t i) const { return (*this)[i]; }
  // Point `p`'s scenario to load: its errors name where each value was written, the file's
  // line:col, the --set, or the value in the sweep's list (a copy's own positions are lost).
  ConfigNode config(const SweepPoint& p) const;
  // Point i's values and folder name without building its tree.
  std::vector<std::string> values(size_t i) const;
  std::string name(size_t i) const;

  // An editable copy of point i, held by this plan from now on and returned by the const
  // operator[] in its place (tests edit one point to make it fail or differ). Each call on a
  // new index holds one more tree: not for loops over the points.
  SweepPoint& operator[](size_t i);

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = SweepPoint;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = SweepPoint;
    Iterator(const SweepPoints* points, size_t i) : points_(points), i_(i) {}
    SweepPoint operator*() const { return (*points_)[i_]; }
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const Iterator& o) const { return i_ == o.i_; }
    bool operator!=(const Iterator& o) const { return i_ != o.i_; }

   private:
    const SweepPoints* points_;
    size_t i_;
  };
  Iterator begin() const { return {this, 0}; }
  Iterator end() const { return {this, size_}; }

 private:
  // Position of point i on each axis.
  std::vector<size_t> digits(size_t i) const;
  SweepPoint build(size_t i) const;

  YAML::Node base_;  // the scenario without `sweep:`; never handed out, only cloned
  std::vector<Axis> axes_;
  ConfigMarksPtr marks_;
  std::string source_;
  size_t size_ = 0;
  int width_ = 1;  // digits of the largest index, for names that sort
  std::map<size_t, SweepPoint> edited_;
};

struct SweepPlan {
  std::string source;             // the scenario file, for messages and relative paths
  std::vector<std::string> keys;  // swept key paths, grid keys first, then zip keys
  // The axes of the product, each the keys that advance together: one per grid key, then all
  // the zip keys as one. Flattened, they are `keys`.
  std::vector<std::vector<std::string>> axes;
  // scenario_hash of the scenario as given (--set applied, `sweep:` block included); the plan
  // does not keep that tree, whose `sweep:` lists may be long.
  std::string scenario_hash;
  SweepPoints points;
};

// A sweep grows multiplicatively; past this many points a typo is likelier than intent.
constexpr size_t kMaxSweepPoints = 1'000'000;

// Expands `root` (a scenario with --set already applied). A scenario without `sweep:` is one
// point with no keys. Throws ConfigError (file:line:col) for a malformed block, a path whose
// parent does not exist in the scenario, an index past the end of a list, zip lists of unequal
// length, or too many points. Each value is checked against the base scenario here; a value that
// only fails in combination with another key's value fails when that point is built (run_sweep
// builds every point before running any).
SweepPlan expand_sweep(const ConfigNode& root);

// Text of a YAML value as it goes into `key=value` and summary.csv: a scalar as written, anything
// else in flow style.
std::string yaml_value_text(const YAML::Node& value);

}  // namespace kvsim
