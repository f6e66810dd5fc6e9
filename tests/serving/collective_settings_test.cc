// The engine keys that change how collectives run (docs/latency.md "Collectives"): p2p,
// disable_custom_all_reduce, enforce_eager, and vLLM's default CUDA-graph capture size.
#include <catch2/catch.hpp>

#include "core/config_node.h"
#include "sim/serving/engine_config.h"

using namespace kvsim;

namespace {
EngineConfig parse(const char* yaml) {
  return parse_engine_config(ConfigNode::parse_string(yaml, "e.yaml"));
}
}  // namespace

TEST_CASE("engine collective keys parse, and a bad p2p is an error at the key",
          "[engine][collectives][config]") {
  const EngineConfig defaults = parse("{}");
  CHECK(defaults.p2p == P2pSetting::kAuto);
  CHECK_FALSE(defaults.disable_custom_all_reduce);
  CHECK_FALSE(defaults.enforce_eager);
  const EngineConfig c = parse("{p2p: off, disable_custom_all_reduce: true, enforce_eager: true}");
  CHECK(c.p2p == P2pSetting::kOff);
  const CollectiveSettings s = collective_settings(c);
  CHECK(s.p2p == P2pSetting::kOff);
  CHECK(s.disable_custom_all_reduce);
  CHECK(s.enforce_eager);
  CHECK_THROWS_WITH(parse("{p2p: maybe}"), Catch::Matchers::Contains("e.yaml:1:7: p2p"));
}

TEST_CASE("the capture size follows vLLM's default: min(2 x max_num_seqs x (1 + k), 512, budget)",
          "[engine][collectives]") {
  // max_num_seqs 256 (default): min(512, 512) = 512, under the 16,384-token budget.
  CHECK(collective_settings(parse("{}")).max_graph_tokens == 512);
  // 128 sequences: 256.
  CHECK(collective_settings(parse("{max_num_seqs: 128}")).max_graph_tokens == 256);
  // A 100-token budget caps it.
  CHECK(default_max_graph_tokens(256, 100) == 100);
  // Speculative decoding with 3 tokens: 40 x 4 x 2 = 320.
  CHECK(default_max_graph_tokens(40, 8192, 3) == 320);
}
