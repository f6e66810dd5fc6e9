// The fast-forward with a hybrid model (local and global KV cache groups, one paged store): its
// decode steps run in stretches, the sliding group's frees reach the store at the steps stepping
// makes them, and both modes write the same files.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "tests/engine/engine_test_util.h"

using namespace kvsim;

TEST_CASE("fast-forward with a hybrid model: every decode step in a stretch, same files",
          "[engine][hybrid][fast_forward]") {
  namespace fs = std::filesystem;
  // One request of gpt-oss-20b (a full-attention group and a 128-token sliding group), a
  // 40-token prompt and 200 output tokens, 16-token blocks: 1 prefill and 199 decode steps (step
  // j targets 40 + j tokens, up to 239). Its KV grows through long deferral windows whose block
  // crossings (targets 49, 65, ..., 225: 1 modulo 16) are counted in aggregate and which end
  // before each growth freeing a block of the sliding group (with c computed tokens it has freed
  // (c - 127) / 16 blocks: the first at c = 143, target 144, then every 16 tokens, 6 by c = 238),
  // so those growths reach the store one by one: the member is due at step 1 (no window yet) and
  // at the frees' steps 104, 120, 136, 152, 168 and 184, and completes at step 199. Nothing else
  // happens: every decode step runs in a stretch, and the quiet runs are the steps between those
  // events: 2-103, then five runs of 15 (105-119, ..., 169-183), then 185-198: 102 + 75 + 14 =
  // 191 quiet steps.
  const fs::path base = test::fresh_dir("hybrid-ff");
  {
    std::ofstream t(base / "trace.csv");
    t << "arrival_s,prompt_tokens,output_tokens\n0,40,200\n";
  }
  const std::string yaml = fmt::format(R"(
name: hybrid-ff
model: gpt-oss-20b
gpu: h100-sxm
engine: {{kv: {{type: paged, block_size: 16}}}}
workload:
  trace: {{path: {}}}
policies: [{{name: p, guards: []}}]
)",
                                       (base / "trace.csv").string());
  const Scenario s = load_scenario(ConfigNode::parse_string(yaml, "t.yaml"), Catalog::builtin());
  test::in_both_modes(s, base, [&](bool ff, const PolicySummary& p, const fs::path&) {
    CHECK(p.availability == 1.0);  // it completes
    CHECK(p.iterations == 200);
    CHECK(p.fast_forward_iterations == (ff ? 199 : 0));
    CHECK(p.quiet_iterations == (ff ? 191 : 0));
  });
  fs::remove_all(base);
}
