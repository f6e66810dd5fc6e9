#include "core/config_patch.h"

#include <charconv>
#include <vector>

#include <fmt/format.h>

#include "core/errors.h"

namespace kvsim {

namespace {

std::vector<std::string> split_path(const std::string& key) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

}  // namespace

YAML::Node apply_set(const YAML::Node& root, const std::string& assignment) {
  YAML::Node out = YAML::Clone(root);
  apply_set_in_place(out, assignment);
  return out;
}

void apply_set_in_place(YAML::Node& root, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError(fmt::format("--set '{}': expected key=value", assignment));
  }
  const std::string key = assignment.substr(0, eq);
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("--set '{}': the value is not valid YAML: {}", assignment, e.msg));
  }
  YAML::Node cur = root;
  const auto parts = split_path(key);
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (part.empty()) throw InputError(fmt::format("--set '{}': empty key in path", assignment));
    const bool last = i + 1 == parts.size();
    size_t index = 0;
    const auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
    if (cur.IsSequence() && ec == std::errc() && p == part.data() + part.size()) {
      if (index >= cur.size()) {
        throw InputError(fmt::format("--set '{}': index {} past the end of a list of {}",
                                     assignment, index, cur.size()));
      }
      if (last) {
        cur[index] = value;
      } else {
        YAML::Node next = cur[index];
        cur.reset(next);
      }
    } else if (cur.IsMap() || cur.IsNull()) {
      if (last) {
        cur[part] = value;
      } else {
        if (!cur[part].IsDefined() || cur[part].IsNull())
          cur[part] = YAML::Node(YAML::NodeType::Map);
        YAML::Node next = cur[part];
        cur.reset(next);
      }
    } else {
      throw InputError(fmt::format("--set '{}': '{}' is inside a {}, not a map", assignment, part,
                                   cur.IsSequence() ? "list" : "scalar"));
    }
  }
}

}  // namespace kvsim
