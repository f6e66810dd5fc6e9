// Registry<Factory>: the one way kvsim names a pluggable concept's implementations (guards, KV
// stores, trace formats, workload generators, schedulers, validate backends). Each entry is a
// name, a one-line description, the configuration keys it accepts and its factory. Every list a
// user sees of a concept comes from here: the `type:` choices and their did-you-mean hint,
// `kvsim check`, `--help` listings, the docs' tables, and the contract tests that run over every
// registered entry. Entries are added by one explicit register_all() per concept (never by
// static initializers, which vanish when a static library drops an unreferenced object file);
// names keep their registration order.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/config_node.h"

namespace kvsim {

template <class Factory>
class Registry {
 public:
  struct Entry {
    std::string name;
    std::string description;        // one line, for listings and docs tables
    std::vector<std::string> keys;  // the configuration keys it accepts besides `type`
    Factory make;
  };

  // `concept_name` names the concept in messages, e.g. "guard", "KV store".
  explicit Registry(std::string concept_name) : concept_(std::move(concept_name)) {}

  // A registry filled by a concept's register function, for its accessor:
  //   const GuardRegistry& guard_registry() {
  //     static const GuardRegistry r = GuardRegistry::filled("guard", register_guards);
  //     return r;
  //   }
  static Registry filled(std::string concept_name, void (*register_all)(Registry&)) {
    Registry r(std::move(concept_name));
    register_all(r);
    return r;
  }

  // Adds an entry. A duplicate or empty name is a programming error (std::logic_error).
  void add(Entry entry) {
    if (entry.name.empty()) throw std::logic_error(concept_ + " registered with an empty name");
    if (find(entry.name)) {
      throw std::logic_error(concept_ + " '" + entry.name + "' registered twice");
    }
    entries_.push_back(std::move(entry));
  }

  const Entry* find(std::string_view name) const {
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [&](const Entry& e) { return e.name == name; });
    return it == entries_.end() ? nullptr : &*it;
  }

  // The entry named by `node`'s `key` (default "type"): a ConfigError at that value's position,
  // with the registered names and a did-you-mean hint, when there is none. `fallback` names the
  // entry used when the key is absent (required when there is no fallback).
  const Entry& choose(const ConfigNode& node, const std::string& key = "type",
                      std::optional<std::string> fallback = std::nullopt) const {
    return *find(node.get_enum(key, names(), std::move(fallback)));
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    out.reserve(entries_.size());
    for (const auto& e : entries_) out.push_back(e.name);
    return out;
  }
  const std::vector<Entry>& entries() const { return entries_; }
  const std::string& concept_name() const { return concept_; }

 private:
  std::string concept_;
  std::vector<Entry> entries_;
};

// "a, b or c" (each name followed by `suffix`), for messages and help texts.
inline std::string or_list(const std::vector<std::string>& names, std::string_view suffix = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += i == 0 ? "" : i + 1 == names.size() ? " or " : ", ";
    out += names[i];
    out += suffix;
  }
  return out;
}

}  // namespace kvsim
