// libFuzzer target: scenario YAML through ConfigNode, load_scenario, the lints and the workload
// loader (which holds the token bounds). A clean InputError/ConfigError is the only acceptable
// failure; any other exception, a sanitizer report, a hang or an out-of-memory is a bug.
#include <cstddef>
#include <cstdint>

#include "core/config_node.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "sim/config/scenario.h"
#include "tests/fuzz/fuzz_util.h"
#include "workloads/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim;
  static const Catalog& catalog = Catalog::builtin();
  try {
    const ConfigNode root = ConfigNode::parse_string(fuzz::as_text(data, size), "fuzz.yaml");
    const Scenario s = load_scenario(root, catalog);
    (void)lint_scenario(s);
    if (auto w = s.root.optional_child("workload")) {
      Workload wl = make_workload(*w, s.seed);
      // A few requests exercise the samplers; a trace path in the input is read like a user's.
      for (int i = 0; i < 16 && wl.source; ++i) {
        if (!wl.source->next()) break;
      }
    }
  } catch (const InputError&) {
    // A clean one-line rejection: what bad input must produce.
  }
  return 0;
}
