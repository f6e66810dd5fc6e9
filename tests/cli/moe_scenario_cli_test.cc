// scenarios/deepseek-v3-ep.yaml: DeepSeek-V3 FP8 on 8 x H200, TP 8 against DP 8 with expert
// parallelism (docs/models.md "Expert parallelism"), run end to end.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.h"

using namespace kvsim::test;

TEST_CASE("scenarios/deepseek-v3-ep.yaml: TP 8 holds one KV pool, DP 8 + EP eight",
          "[cli][parallel][moe][e2e]") {
  const std::string dir = make_temp_dir("kvsim-ep");
  auto r = run_cli("run -o '" + dir + "/out' '" + std::string(KVSIM_SOURCE_DIR) +
                   "/scenarios/deepseek-v3-ep.yaml'");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(read_text(dir + "/out/summary.json"));
  const auto& tp8 = j["policies"][0];
  const auto& ep = j["policies"][1];
  // Weights per GPU as tests/models/moe_mla_test.cc derives them (FP8 with 128 x 128 blocks).
  CHECK(tp8["gpu_layout"]["weights_bytes_per_gpu"] == 85'140'071'456LL);
  CHECK(ep["gpu_layout"]["weights_bytes_per_gpu"] == 100'840'687'968LL);
  // MLA's latent is whole on every GPU either way: 61 x 576 x 2 bytes.
  CHECK(tp8["gpu_layout"]["kv_bytes_per_token_per_gpu"] == 70'272);
  CHECK(ep["gpu_layout"]["kv_bytes_per_token_per_gpu"] == 70'272);
  // TP 8's 8 GPUs hold one pool (each every token's latent); DP 8's each hold their own, so the
  // node holds 8 pools of fewer tokens (more weights per GPU): over 5x TP 8's tokens.
  const int64_t tp8_tokens = tp8["gpu_layout"]["kv_pool_tokens_per_gpu"].get<int64_t>();
  const int64_t ep_tokens = ep["gpu_layout"]["kv_pool_tokens_per_gpu"].get<int64_t>();
  CHECK(ep_tokens < tp8_tokens);
  CHECK(8 * ep_tokens > 5 * tp8_tokens);
  CHECK(ep["replicas"].size() == 8);
  // Under the same traffic the eight pools queue less: lower TTFT and fewer preemptions.
  CHECK(ep["ttft_s"]["p99"].get<double>() < tp8["ttft_s"]["p99"].get<double>());
  CHECK(ep["preemptions"].get<int64_t>() < tp8["preemptions"].get<int64_t>());
  CHECK(tp8["outcomes"]["lost_oom"] == 0);
  CHECK(ep["outcomes"]["lost_oom"] == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("kvsim kv prints MLA's latent and its 70,272 bytes a token", "[cli][mla]") {
  // DeepSeek-V3, BF16 KV: 61 layers x (512 + 64) x 2 bytes; at 4,096 tokens 287,834,112 bytes.
  auto r = run_cli("kv --model deepseek-v3 --seq 4096 --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j[0]["kv_bytes_per_request"] == 287'834'112LL);
  auto human = run_cli("kv --model deepseek-v3 --seq 4096");
  CHECK(human.out.find("MLA: 61 layers x (latent 512 + rotary 64), KV bf16): 70,272 bytes") !=
        std::string::npos);
}
