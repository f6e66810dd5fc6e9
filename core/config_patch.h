// `--set key=value`: patches a scenario tree before it is read. Keys are dotted paths with list
// indices as numbers (engine.kv.block_size, policies.1.guards.0.safety_margin_gb); the value is
// parsed as YAML (so `[2, 5]` or `{type: paged}` work too).
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

namespace kvsim {

// Returns a patched deep copy. Throws InputError naming the assignment when the path does not
// resolve (an index past the end, a key under a scalar) or the text is not `key=value`.
YAML::Node apply_set(const YAML::Node& root, const std::string& assignment);
// The same on `root` itself. A copy (YAML::Clone) loses every node's file position, so a scenario
// patched by --set would report every later error at "file:1:1"; patching in place keeps the
// positions of everything the --set did not write.
void apply_set_in_place(YAML::Node& root, const std::string& assignment);

}  // namespace kvsim
