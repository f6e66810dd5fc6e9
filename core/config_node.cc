#include "core/config_node.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>

#include "core/echo_text.h"
#include "core/errors.h"

namespace kvsim {

// Shared by every copy of a ConfigNode, so keys read through one copy count for all of them.
struct ConfigNode::State {
  YAML::Node node;
  std::string source;
  std::string path;
  int line = 0;  // 1-based; 0 when unknown
  int column = 0;
  std::set<std::string> known_keys;
  std::map<std::string, std::shared_ptr<State>> map_children;
  std::map<size_t, std::shared_ptr<State>> seq_children;
  // Merged maps only: where each key was written (its entry's own map may be another section),
  // and the value as written there, which keeps its marks (the merged map holds copies).
  struct Origin {
    YAML::Node value;
    std::string source;
    std::string parent_path;
    int line = 0;
    int column = 0;
  };
  std::map<std::string, Origin> key_origins;
  // What patched values into the tree (--set assignments, a copy's `written`): (the key path, as
  // ConfigNode writes paths, and what messages name instead of a position, e.g.
  // "--set seed=3"). Shared by every node of the tree.
  std::shared_ptr<const std::vector<std::pair<std::string, std::string>>> sets;
  // A copy's positions, by key path (its nodes have none); null for a parsed tree.
  ConfigMarksPtr marks;
};

struct ConfigMarks {
  struct Pos {
    int line = 0, column = 0;          // the value's (its key's when it has no mark)
    int key_line = 0, key_column = 0;  // the key's, for a map entry
  };
  std::string source;
  std::unordered_map<std::string, Pos> at;  // by key path
  std::shared_ptr<const std::vector<std::pair<std::string, std::string>>> sets;
};

namespace {

// Bounds on the parsed document: alias chains can make a tiny file describe a huge tree.
constexpr int kMaxDepth = 64;
constexpr int64_t kMaxNodes = 1'000'000;

std::string position(const std::string& source, int line, int column) {
  return line > 0 ? fmt::format("{}:{}:{}", source, line, column) : source;
}

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Scalar: return fmt::format("\"{}\"", echo_text(n.Scalar()));
    default: return "an undefined node";
  }
}

// Walks the parsed tree once: duplicate keys, depth and size limits.
void validate_tree(const YAML::Node& n, const std::string& source, int depth, int64_t& count) {
  if (++count > kMaxNodes) {
    throw ConfigError(fmt::format("{}: document expands to more than {} nodes (YAML alias bomb?)",
                                  source, kMaxNodes));
  }
  if (depth > kMaxDepth) {
    throw ConfigError(fmt::format("{}: nesting deeper than {} levels",
                                  position(source, n.Mark().line + 1, n.Mark().column + 1),
                                  kMaxDepth));
  }
  if (n.IsMap()) {
    std::set<std::string> seen;
    for (const auto& kv : n) {
      if (!kv.first.IsScalar()) {
        throw ConfigError(
            fmt::format("{}: expected a plain key, got {}",
                        position(source, kv.first.Mark().line + 1, kv.first.Mark().column + 1),
                        describe(kv.first)));
      }
      const std::string& key = kv.first.Scalar();
      if (!seen.insert(key).second) {
        throw ConfigError(
            fmt::format("{}: duplicate key '{}'",
                        position(source, kv.first.Mark().line + 1, kv.first.Mark().column + 1),
                        echo_text(key)));
      }
      validate_tree(kv.second, source, depth + 1, count);
    }
  } else if (n.IsSequence()) {
    for (const auto& e : n) validate_tree(e, source, depth + 1, count);
  }
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// `marks`: a copy's positions (its nodes have none), looked up by path; null for a parsed tree.
std::shared_ptr<ConfigNode::State> make_state(YAML::Node node, const std::string& source,
                                              std::string path, int fallback_line, int fallback_col,
                                              const ConfigMarksPtr& marks) {
  auto s = std::make_shared<ConfigNode::State>();
  s->node = node;
  s->source = source;
  s->path = std::move(path);
  s->marks = marks;
  if (marks) {
    const auto it = marks->at.find(s->path);
    s->line = it != marks->at.end() ? it->second.line : fallback_line;
    s->column = it != marks->at.end() ? it->second.column : fallback_col;
    return s;
  }
  const YAML::Mark m = node.Mark();
  // yaml-cpp marks are 0-based; nodes without a mark (null values) take their key's position.
  s->line = m.line >= 0 ? m.line + 1 : fallback_line;
  s->column = m.line >= 0 ? m.column + 1 : fallback_col;
  return s;
}

// Where the key `key_node` of the map `s` was written, and the key path of the map holding it.
ConfigNode::State::Origin origin_of(const ConfigNode::State& s, const YAML::Node& key_node) {
  if (auto it = s.key_origins.find(key_node.Scalar()); it != s.key_origins.end()) return it->second;
  if (s.marks) {
    const auto it = s.marks->at.find(join_path(s.path, key_node.Scalar()));
    if (it == s.marks->at.end()) return {YAML::Node(), s.source, s.path, 0, 0};
    return {YAML::Node(), s.source, s.path, it->second.key_line, it->second.key_column};
  }
  return {YAML::Node(), s.source, s.path, key_node.Mark().line + 1, key_node.Mark().column + 1};
}

// Records the position of `n` (at `path`) and of everything under it, as ConfigNode would give
// them when reading `root`'s tree.
void record_marks(const ConfigNode::State& root, const YAML::Node& n, const std::string& path,
                  ConfigMarks::Pos pos, const std::vector<std::string>& skip, ConfigMarks& out) {
  out.at[path] = pos;
  if (n.IsMap()) {
    for (const auto& kv : n) {
      const std::string key = kv.first.Scalar();
      if (path.empty() && std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
      const std::string child = join_path(path, key);
      ConfigMarks::Pos p;
      if (root.marks) {
        const auto it = root.marks->at.find(child);
        if (it != root.marks->at.end()) p = it->second;
      } else {
        p.key_line = kv.first.Mark().line + 1;
        p.key_column = kv.first.Mark().column + 1;
        const YAML::Mark m = kv.second.Mark();
        p.line = m.line >= 0 ? m.line + 1 : p.key_line;
        p.column = m.line >= 0 ? m.column + 1 : p.key_column;
      }
      record_marks(root, kv.second, child, p, {}, out);
    }
  } else if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) {
      const std::string child = fmt::format("{}[{}]", path, i);
      ConfigMarks::Pos p{.line = pos.line, .column = pos.column};
      if (root.marks) {
        const auto it = root.marks->at.find(child);
        if (it != root.marks->at.end()) p = it->second;
      } else if (const YAML::Mark m = n[i].Mark(); m.line >= 0) {
        p.line = m.line + 1;
        p.column = m.column + 1;
      }
      record_marks(root, n[i], child, p, {}, out);
    }
  }
}

// A --set key ("policies.1.guards.0.kind") as ConfigNode writes paths
// ("policies[1].guards[0].kind").
std::string set_key_path(const std::string& key) {
  std::string out, part;
  std::stringstream ss(key);
  while (std::getline(ss, part, '.')) {
    const bool index = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    if (index && !out.empty()) {
      out += "[" + part + "]";
    } else {
      out += (out.empty() ? "" : ".") + part;
    }
  }
  return out;
}

// The --set assignment that wrote the value at `path` (the last one, when several did), if any: its
// line:col would be a place in the --set text, not in the file, so messages name it instead.
const std::string* set_covering(const ConfigNode::State& s, const std::string& path) {
  if (!s.sets) return nullptr;
  for (auto it = s.sets->rbegin(); it != s.sets->rend(); ++it) {
    const std::string& k = it->first;
    if (path.compare(0, k.size(), k) == 0 &&
        (path.size() == k.size() || path[k.size()] == '.' || path[k.size()] == '[')) {
      return &it->second;
    }
  }
  return nullptr;
}

}  // namespace

std::optional<std::string> nearest_name(const std::string& word,
                                        const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

ConfigNode::ConfigNode(std::shared_ptr<State> state) : state_(std::move(state)) {}

ConfigNode ConfigNode::parse_string(std::string_view text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: invalid YAML: {}",
                                  position(source, e.mark.line + 1, e.mark.column + 1), e.msg));
  }
  int64_t count = 0;
  validate_tree(root, source, 0, count);
  return wrap(root, source);
}

ConfigNode ConfigNode::parse_file(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::file_type type = std::filesystem::status(path, ec).type();
  if (type == std::filesystem::file_type::not_found) {
    throw ConfigError(fmt::format("{}: no such file", path.string()));
  }
  if (ec) {  // a symbolic link loop, a folder without permission, ...
    throw ConfigError(fmt::format("{}: cannot read: {}", path.string(), ec.message()));
  }
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError(fmt::format("{}: is a folder, expected a YAML file", path.string()));
  }
  // A FIFO would block the read and a device (/dev/zero) never ends it.
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw ConfigError(
        fmt::format("{}: is not a regular file (a FIFO, a device or a socket), "
                    "expected a YAML file",
                    path.string()));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot read file", path.string()));
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  if (text.find('\0') != std::string::npos) {
    throw ConfigError(fmt::format("{}: binary data, expected a YAML text file", path.string()));
  }
  return parse_string(text, path.string());
}

ConfigNode ConfigNode::wrap_with_sets(YAML::Node node, const std::string& source,
                                      const std::vector<std::string>& sets) {
  ConfigNode n = wrap(std::move(node), source);
  auto list = std::make_shared<std::vector<std::pair<std::string, std::string>>>();
  for (const std::string& a : sets) {
    list->emplace_back(set_key_path(a.substr(0, a.find('='))), "--set " + echo_text(a, 80));
  }
  n.state_->sets = std::move(list);
  return n;
}

ConfigNode ConfigNode::wrap(YAML::Node node, const std::string& source, const std::string& path) {
  return ConfigNode(make_state(node, source, path, 1, 1, nullptr));
}

ConfigNode ConfigNode::wrap_copy(YAML::Node copy, const ConfigMarksPtr& marks,
                                 std::vector<std::pair<std::string, std::string>> written) {
  auto s = make_state(std::move(copy), marks->source, "", 1, 1, marks);
  if (marks->sets) written.insert(written.begin(), marks->sets->begin(), marks->sets->end());
  if (!written.empty()) {
    s->sets = std::make_shared<const std::vector<std::pair<std::string, std::string>>>(
        std::move(written));
  }
  return ConfigNode(s);
}

std::string ConfigNode::key_path(const std::string& dotted) { return set_key_path(dotted); }

ConfigMarksPtr ConfigNode::marks(const std::vector<std::string>& skip) const {
  auto out = std::make_shared<ConfigMarks>();
  out->source = state_->source;
  out->sets = state_->sets;
  record_marks(*state_, state_->node, state_->path,
               {.line = state_->line, .column = state_->column}, skip, *out);
  return out;
}

std::optional<std::string> ConfigNode::written_by() const {
  if (const std::string* label = set_covering(*state_, state_->path)) return *label;
  return std::nullopt;
}

ConfigNode ConfigNode::merge(const std::vector<ConfigNode>& layers, const ConfigNode& fallback) {
  const State& at = layers.empty() ? *fallback.state_ : *layers.back().state_;
  auto s = std::make_shared<State>();
  s->node = YAML::Node(YAML::NodeType::Map);
  s->source = at.source;
  s->path = at.path;
  s->line = at.line;
  s->column = at.column;
  s->sets = at.sets;
  s->marks = at.marks;
  for (const ConfigNode& layer : layers) {
    if (!layer.is_map()) continue;
    for (const auto& kv : layer.state_->node) {
      // The map holds copies (YAML::Clone drops marks; sharing the node itself would rewire the
      // original tree's memory, which other threads of a sweep may be reading); children are
      // read from the original, through the origin.
      const std::string key = kv.first.Scalar();
      s->node[key] = YAML::Clone(kv.second);
      State::Origin o = origin_of(*layer.state_, kv.first);
      o.value.reset(kv.second);
      // Not assignment: assigning to a YAML::Node that holds a node rewrites that node (here the
      // earlier layer's entry, in the scenario's own tree) instead of rebinding the handle.
      s->key_origins.erase(key);
      s->key_origins.emplace(key, std::move(o));
    }
  }
  return ConfigNode(s);
}

bool ConfigNode::is_map() const { return state_->node.IsMap(); }
bool ConfigNode::is_sequence() const { return state_->node.IsSequence(); }
bool ConfigNode::is_scalar() const { return state_->node.IsScalar(); }
bool ConfigNode::is_null() const { return state_->node.IsNull(); }
const std::string& ConfigNode::path() const { return state_->path; }
const std::string& ConfigNode::source() const { return state_->source; }
const YAML::Node& ConfigNode::yaml() const { return state_->node; }
int ConfigNode::line() const { return state_->line; }
std::string ConfigNode::where() const {
  if (const std::string* label = set_covering(*state_, state_->path)) return *label;
  return position(state_->source, state_->line, state_->column);
}

void ConfigNode::fail(const std::string& message) const {
  if (const std::string* label = set_covering(*state_, state_->path)) {
    throw ConfigError(fmt::format("{}: {}: {}", *label, state_->path, message));
  }
  if (state_->path.empty()) throw ConfigError(fmt::format("{}: {}", where(), message));
  throw ConfigError(fmt::format("{}: {}: {}", where(), state_->path, message));
}

void ConfigNode::fail_expected(const std::string& what) const {
  fail(fmt::format("expected {}, got {}", what, describe(state_->node)));
}

bool ConfigNode::has(const std::string& key) const {
  if (!state_->node.IsMap()) return false;
  for (const auto& kv : state_->node) {
    if (kv.first.Scalar() == key) return true;
  }
  return false;
}

void ConfigNode::allow(const std::vector<std::string>& keys) const {
  state_->known_keys.insert(keys.begin(), keys.end());
}

size_t ConfigNode::size() const { return state_->node.size(); }

std::optional<ConfigNode> ConfigNode::optional_child(const std::string& key) const {
  if (!is_map()) {
    if (is_null()) {
      state_->known_keys.insert(key);
      return std::nullopt;
    }
    fail_expected("a map");
  }
  state_->known_keys.insert(key);
  if (auto it = state_->map_children.find(key); it != state_->map_children.end()) {
    return ConfigNode(it->second);
  }
  auto c = peek(key);
  if (c) state_->map_children.emplace(key, c->state_);
  return c;
}

std::optional<ConfigNode> ConfigNode::peek(const std::string& key) const {
  if (!is_map()) return std::nullopt;
  for (const auto& kv : state_->node) {
    if (kv.first.Scalar() != key) continue;
    const State::Origin o = origin_of(*state_, kv.first);
    const bool merged = state_->key_origins.count(key) > 0;
    auto st = make_state(merged ? o.value : kv.second, o.source, join_path(o.parent_path, key),
                         o.line, o.column, state_->marks);
    st->sets = state_->sets;
    return ConfigNode(st);
  }
  return std::nullopt;
}

ConfigNode ConfigNode::child(const std::string& key) const {
  auto c = optional_child(key);
  if (!c) {
    if (state_->path.empty())
      throw ConfigError(fmt::format("{}: missing required key '{}'", where(), key));
    fail(fmt::format("missing required key '{}'", key));
  }
  return *c;
}

ConfigNode ConfigNode::at(size_t index) const {
  if (!is_sequence()) fail_expected("a list");
  if (index >= size()) fail(fmt::format("index {} out of range (list has {})", index, size()));
  if (auto it = state_->seq_children.find(index); it != state_->seq_children.end()) {
    return ConfigNode(it->second);
  }
  auto s =
      make_state(state_->node[index], state_->source, fmt::format("{}[{}]", state_->path, index),
                 state_->line, state_->column, state_->marks);
  s->sets = state_->sets;
  state_->seq_children.emplace(index, s);
  return ConfigNode(s);
}

std::vector<std::string> ConfigNode::keys() const {
  std::vector<std::string> out;
  if (!is_map()) return out;
  for (const auto& kv : state_->node) out.push_back(kv.first.Scalar());
  return out;
}

template <>
std::string ConfigNode::as<std::string>(Bounds) const {
  if (!is_scalar()) fail_expected("a string");
  return state_->node.Scalar();
}

template <>
bool ConfigNode::as<bool>(Bounds) const {
  bool v = false;
  if (!is_scalar() || !YAML::convert<bool>::decode(state_->node, v)) fail_expected("true or false");
  return v;
}

template <>
double ConfigNode::as<double>(Bounds b) const {
  double v = 0;
  if (!is_scalar() || !YAML::convert<double>::decode(state_->node, v)) fail_expected("a number");
  if (!std::isfinite(v)) fail_expected("a finite number");
  std::string range;
  if (b.min) range += fmt::format(" {} {}", b.min_exclusive ? ">" : ">=", *b.min);
  if (b.max) range += fmt::format("{} <= {}", range.empty() ? "" : " and", *b.max);
  if ((b.min && (b.min_exclusive ? v <= *b.min : v < *b.min)) || (b.max && v > *b.max)) {
    fail_expected("a number" + range);
  }
  return v;
}

template <>
int64_t ConfigNode::as<int64_t>(Bounds b) const {
  int64_t v = 0;
  if (!is_scalar() || !YAML::convert<int64_t>::decode(state_->node, v)) {
    // Accept integral values written as floats ("1e6"), which people write for big counts.
    double d = 0;
    if (is_scalar() && YAML::convert<double>::decode(state_->node, d) && std::isfinite(d) &&
        d == std::floor(d) && std::fabs(d) < 9.0e18) {
      v = static_cast<int64_t>(d);
    } else {
      fail_expected("an integer");
    }
  }
  std::string range;
  if (b.min)
    range += fmt::format(" {} {}", b.min_exclusive ? ">" : ">=", static_cast<int64_t>(*b.min));
  if (b.max)
    range += fmt::format("{} <= {}", range.empty() ? "" : " and", static_cast<int64_t>(*b.max));
  const double dv = static_cast<double>(v);
  if ((b.min && (b.min_exclusive ? dv <= *b.min : dv < *b.min)) || (b.max && dv > *b.max)) {
    fail_expected("an integer" + range);
  }
  return v;
}

template <>
int ConfigNode::as<int>(Bounds b) const {
  if (!b.max || *b.max > 2147483647.0) b.max = 2147483647.0;
  if (!b.min || *b.min < -2147483648.0) b.min = b.min.value_or(-2147483648.0);
  return static_cast<int>(as<int64_t>(b));
}

std::string ConfigNode::get_enum(const std::string& key,
                                 std::initializer_list<std::string_view> choices,
                                 std::optional<std::string> fallback) const {
  return get_enum(key, std::vector<std::string>(choices.begin(), choices.end()),
                  std::move(fallback));
}

std::string ConfigNode::get_enum(const std::string& key, const std::vector<std::string>& choices,
                                 std::optional<std::string> fallback) const {
  auto c = optional_child(key);
  if (!c || c->is_null()) {
    if (fallback) return *fallback;
    c = child(key);  // throws "missing required key"
  }
  std::string v = c->as<std::string>();
  if (std::find(choices.begin(), choices.end(), v) != choices.end()) return v;
  std::string list;
  for (const auto& ch : choices) list += (list.empty() ? "" : ", ") + ch;
  std::string hint;
  if (auto near = nearest_name(v, choices)) hint = fmt::format("; did you mean '{}'?", *near);
  c->fail(fmt::format("expected one of {}, got \"{}\"{}", list, echo_text(v), hint));
}

void ConfigNode::reject_unknown_keys() const {
  if (is_map()) {
    std::vector<std::string> known(state_->known_keys.begin(), state_->known_keys.end());
    for (const auto& kv : state_->node) {
      const std::string key = kv.first.Scalar();
      if (state_->known_keys.count(key)) continue;
      std::string hint;
      if (auto near = nearest_name(key, known)) hint = fmt::format("; did you mean '{}'?", *near);
      const State::Origin o = origin_of(*state_, kv.first);
      std::string where_key = position(o.source, o.line, o.column);
      if (const std::string* label = set_covering(*state_, join_path(o.parent_path, key))) {
        where_key = *label;
      }
      std::string prefix = o.parent_path.empty() ? "" : o.parent_path + ": ";
      throw ConfigError(
          fmt::format("{}: {}unknown key '{}'{}", where_key, prefix, echo_text(key), hint));
    }
  }
  for (const auto& [k, s] : state_->map_children) ConfigNode(s).reject_unknown_keys();
  for (const auto& [i, s] : state_->seq_children) ConfigNode(s).reject_unknown_keys();
}

void ConfigNode::reject_unknown_keys_listing(const std::string& what) const {
  if (!is_map()) return;
  std::vector<std::string> known(state_->known_keys.begin(), state_->known_keys.end());
  std::sort(known.begin(), known.end());
  for (const auto& kv : state_->node) {
    const std::string key = kv.first.Scalar();
    if (state_->known_keys.count(key)) continue;
    std::string hint;
    if (auto near = nearest_name(key, known)) hint = fmt::format("; did you mean '{}'?", *near);
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    const State::Origin o = origin_of(*state_, kv.first);
    std::string prefix = o.parent_path.empty() ? "" : o.parent_path + ": ";
    throw ConfigError(fmt::format("{}: {}unknown key '{}'{} ({} accepts: {})",
                                  position(o.source, o.line, o.column), prefix, key, hint, what,
                                  list));
  }
}

}  // namespace kvsim
