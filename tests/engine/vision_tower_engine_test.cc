// limit_mm_per_prompt {image: 0}: a multimodal checkpoint served as text only. vLLM then builds
// no vision tower (gemma3_mm.py / mllama4.py construct it only when
// multimodal_config.get_limit_per_prompt("image") > 0), so its weights stay free for KV.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "core/config_node.h"
#include "sim/serving/engine_config.h"
#include "tests/engine/engine_test_util.h"

using namespace kvsim;

TEST_CASE("limit_mm_per_prompt: the key, as vLLM's --limit-mm-per-prompt", "[engine][vision]") {
  auto engine = [](const std::string& yaml) {
    return parse_engine_config(ConfigNode::parse_string(yaml, "engine.yaml"));
  };
  CHECK_FALSE(engine("{}").images_off);
  CHECK_FALSE(engine("{limit_mm_per_prompt: {image: 2}}").images_off);
  CHECK(engine("{limit_mm_per_prompt: {image: 0}}").images_off);
  CHECK_THROWS_WITH(engine("{limit_mm_per_prompt: {images: 0}}"),
                    Catch::Contains("engine.yaml:1:") && Catch::Contains("images"));
}

TEST_CASE("Gemma 3 served text-only holds its vision tower's bytes as KV instead",
          "[engine][vision]") {
  // google/gemma-3-27b-it's config.json: its SigLIP tower and projector are 846,120,672 bytes
  // in BF16 (tests/models/vision_tower_test.cc). Two policies on one H100, the same budget
  // otherwise: the text-only one's paged pool is larger by those bytes, less what the
  // whole-block rounding of each pool cuts (under one block of 10 layers x 16 tokens x
  // 8,192 = 1,310,720 bytes).
  const auto dir = test::fresh_dir("vision-tower");
  const auto config = dir / "config.json";
  std::ofstream(config) << R"({"architectures": ["Gemma3ForConditionalGeneration"],
  "text_config": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504,
    "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
    "sliding_window": 1024},
  "torch_dtype": "bfloat16",
  "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
    "num_hidden_layers": 27, "patch_size": 14}})";
  const RunResult r = test::run_yaml("name: t\nmodel: " + config.string() + R"(
gpu: h100-sxm
engine: {max_model_len: 8192}
workload: {arrivals: {type: fixed, rate: 1}, max_requests: 1, prompt_tokens: 100, output_tokens: 1}
policies:
  - {name: images}
  - {name: text-only, engine: {limit_mm_per_prompt: {image: 0}}}
)");
  REQUIRE(r.policies.size() == 2);
  const int64_t more = r.policies[1].kv_pool_bytes - r.policies[0].kv_pool_bytes;
  CHECK(more > 846'120'672 - 1'310'720);
  CHECK(more < 846'120'672 + 1'310'720);
}
