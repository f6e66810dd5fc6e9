// ConfigNode: a YAML node that knows where it came from (file, line, column, key path) and which
// of its keys were read, so every schema error names its position and every leftover key is an
// error ("unknown key 'safty_margin_gb'; did you mean 'safety_margin_gb'?").
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvsim {

// Where every value of a scenario tree was written (ConfigNode::marks()): kept apart from the
// tree, since a copy of it (YAML::Clone, as each sweep point and capacity probe is) drops every
// node's position. Shared, read-only: threads may use one at once.
struct ConfigMarks;
using ConfigMarksPtr = std::shared_ptr<const ConfigMarks>;

// Range accepted for a number; both ends inclusive unless `min_exclusive`.
struct Bounds {
  std::optional<double> min;
  std::optional<double> max;
  bool min_exclusive = false;
};

class ConfigNode {
 public:
  // Parses a whole file. Throws ConfigError (file:line:col) on unreadable files, YAML syntax
  // errors, duplicate keys, too-deep nesting and documents that expand too far through aliases.
  static ConfigNode parse_file(const std::filesystem::path& path);
  // Same from text; `source` names it in messages.
  static ConfigNode parse_string(std::string_view text, const std::string& source);
  // Wraps an already-parsed node (e.g. one patched by --set, or a merged section); `path` is the
  // key path its messages start from.
  static ConfigNode wrap(YAML::Node node, const std::string& source, const std::string& path = "");
  // The same for a tree patched by `sets` (--set KEY=VALUE, in order): an error in a value a --set
  // wrote names that --set and the key path instead of a line:col, which would be a place in the
  // --set text labelled with the file's name.
  static ConfigNode wrap_with_sets(YAML::Node node, const std::string& source,
                                   const std::vector<std::string>& sets);
  // Wraps `copy`, a copy of the tree `marks` were taken from (patched or not), so that its
  // messages name where the original's values were written: their file:line:col, or the --set
  // that wrote one. `written`: what the copy's patches wrote since, as (key path as ConfigNode
  // writes paths, e.g. "policies[1].engine", see key_path(); what wrote it, e.g.
  // "--over engine.tensor_parallel=1,2" or the "file:line:col" of a sweep value); an error at or
  // under such a path names that instead of a position (the last one given, when several do).
  static ConfigNode wrap_copy(YAML::Node copy, const ConfigMarksPtr& marks,
                              std::vector<std::pair<std::string, std::string>> written = {});
  // A dotted key ("policies.1.guards.0") as ConfigNode writes paths ("policies[1].guards[0]").
  static std::string key_path(const std::string& dotted);
  // A map of the entries of `layers` (maps or nulls), a later layer's key replacing an earlier
  // one's (a policy's `engine:` over the scenario's). Nothing is copied: every entry keeps the
  // position and key path it was written at ("policies[1].engine.kv"), so its errors, unknown
  // keys included, name the place the user wrote it. The map itself takes the last layer's
  // position and path, or `fallback`'s when there is no layer.
  static ConfigNode merge(const std::vector<ConfigNode>& layers, const ConfigNode& fallback);

  bool is_map() const;
  bool is_sequence() const;
  bool is_scalar() const;
  bool is_null() const;
  // Whether this map has `key`. Pure: it does not count as reading the key (declare keys that no
  // accessor reads with allow()).
  bool has(const std::string& key) const;
  size_t size() const;  // elements of a sequence, keys of a map

  // Required map child; a missing key is an error at this map's position.
  ConfigNode child(const std::string& key) const;
  std::optional<ConfigNode> optional_child(const std::string& key) const;
  // The same, but pure like has(): the key is not read, and the child is not one that
  // reject_unknown_keys() walks (for a section read as a whole elsewhere, e.g. through merge()).
  std::optional<ConfigNode> peek(const std::string& key) const;
  ConfigNode at(size_t index) const;  // Requires: is_sequence(), index < size()
  std::vector<std::string> keys() const;
  // Declares keys this map accepts besides those its accessors read (keys read elsewhere, e.g. from
  // the raw tree, and the full key list of a registry entry so that a typo's did-you-mean sees
  // every key of the type). Allowed keys are never "unknown".
  void allow(const std::vector<std::string>& keys) const;

  // Scalar accessors. T is one of bool, int, int64_t, double, std::string. Numbers must be finite
  // and inside `bounds`.
  template <class T>
  T as(Bounds bounds = {}) const;
  template <class T>
  T get(const std::string& key, Bounds bounds = {}) const {
    return child(key).as<T>(bounds);
  }
  template <class T>
  T get(const std::string& key, T fallback, Bounds bounds = {}) const {
    auto c = optional_child(key);
    return c && !c->is_null() ? c->as<T>(bounds) : fallback;
  }
  // The value when the key is present (an error when it is present but not a T); nullopt when
  // absent. The key counts as read either way.
  template <class T>
  std::optional<T> get_optional(const std::string& key, Bounds bounds = {}) const {
    auto c = optional_child(key);
    if (!c) return std::nullopt;
    return c->as<T>(bounds);
  }
  // A string that must be one of `choices`; `fallback` when the key is absent (required if none).
  std::string get_enum(const std::string& key, std::initializer_list<std::string_view> choices,
                       std::optional<std::string> fallback = std::nullopt) const;
  // The same with a list made at run time (a Registry's names).
  std::string get_enum(const std::string& key, const std::vector<std::string>& choices,
                       std::optional<std::string> fallback = std::nullopt) const;

  // Typed: the value of the choice named, e.g.
  //   c.get_enum<OnFail>("on_fail", {{"reject", OnFail::kReject}, {"queue", OnFail::kQueue}},
  //                      OnFail::kReject)
  // Same messages as the string form (choices in the order given, did-you-mean).
  template <class E>
  E get_enum(const std::string& key, std::initializer_list<std::pair<std::string_view, E>> choices,
             std::optional<E> fallback = std::nullopt) const {
    if (fallback) {
      auto c = optional_child(key);
      if (!c || c->is_null()) return *fallback;
    }
    std::vector<std::string> names;
    for (const auto& choice : choices) names.emplace_back(choice.first);
    const std::string got = get_enum(key, names);
    for (const auto& choice : choices) {
      if (choice.first == got) return choice.second;
    }
    return choices.begin()->second;  // unreachable: get_enum accepted only listed names
  }

  // Throws for the first key of this map (and of every child reached through child()/at())
  // that no accessor asked for.
  void reject_unknown_keys() const;
  // The same for this map's own keys only, the message ending with the keys it accepts (sorted):
  // "...: unknown key 'modle'; did you mean 'model'? (a policy accepts: cluster, engine, ...)",
  // `what` being "a policy". For a map whose accepted keys a user cannot guess from the docs
  // at hand.
  void reject_unknown_keys_listing(const std::string& what) const;

  // The marks of this tree (a root's), for wrap_copy(); `skip`: top-level keys left out (a sweep
  // block's lists, which no copy holds).
  ConfigMarksPtr marks(const std::vector<std::string>& skip = {}) const;
  // What wrote this node when it is not a place in the file: the --set (or a wrap_copy `written`
  // entry) at or above its path; nullopt for a value the file wrote.
  std::optional<std::string> written_by() const;

  // "file:line:col" of this node (1-based); written_by() for a value a --set wrote.
  std::string where() const;
  int line() const;  // 1-based; 0 when unknown
  // Dotted key path, e.g. "policies[1].guards[0]"; empty at the root.
  const std::string& path() const;
  const std::string& source() const;
  const YAML::Node& yaml() const;

  // Throws ConfigError "<where>: <path>: <message>".
  [[noreturn]] void fail(const std::string& message) const;
  // Throws "expected <what>, got <this node's text or kind>".
  [[noreturn]] void fail_expected(const std::string& what) const;

  struct State;

 private:
  explicit ConfigNode(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

// Nearest candidate by edit distance, if it is close enough to be a plausible typo.
std::optional<std::string> nearest_name(const std::string& word,
                                        const std::vector<std::string>& candidates);

}  // namespace kvsim
