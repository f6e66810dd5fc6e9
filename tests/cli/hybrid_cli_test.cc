// `kvsim kv` on hybrid local/global models: the KV cache groups of vLLM's hybrid manager and the
// block bytes a request holds in each (docs/models.md "Hybrid KV"), and the two hybrid what-ifs
// run end to end (scenarios/gpt-oss-120b-h100.yaml, scenarios/gemma-3-27b-window.yaml).
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.h"

using namespace kvsim::test;

TEST_CASE("kvsim kv shows a hybrid model's KV per group", "[cli][hybrid]") {
  // gpt-oss-120b at 2,048 tokens, blocks of 16: 128 blocks a table. Full group: 128 blocks of
  // 589,824 bytes = 75,497,472. Sliding group (window 128): tokens before 2,048 - 128 + 1 = 1,921
  // are skipped, 120 whole blocks: 8 held = 4,718,592. A request holds their sum, 80,216,064
  // (the headline and the risk use it); every layer at every token would be
  // 2,048 x 73,728 = 150,994,944.
  auto r = run_cli("kv --model gpt-oss-120b --seq 2048 --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j[0]["kv_bytes_per_request"] == 80'216'064LL);
  CHECK(j[0]["every_token_kv_bytes_per_request"] == 150'994'944LL);
  CHECK(j[0]["group_size"] == 18);
  REQUIRE(j[0]["groups"].size() == 2);
  CHECK(j[0]["groups"][0]["attention"] == "full");
  CHECK(j[0]["groups"][0]["held_bytes_per_request"] == 75'497'472LL);
  CHECK(j[0]["groups"][1]["attention"] == "sliding window 128");
  CHECK(j[0]["groups"][1]["held_bytes_per_request"] == 4'718'592LL);
  auto human = run_cli("kv --model gpt-oss-120b --seq 2048");
  REQUIRE(human.exit_code == 0);
  CHECK(human.out.find("2 groups of 18 layers (0 padding), one pool of blocks of 18 layers x 16 "
                       "tokens = 589,824 bytes") != std::string::npos);
  CHECK(human.out.find("75,497,472") != std::string::npos);
  // A full-attention model's JSON has no groups.
  auto dense = nlohmann::json::parse(run_cli("kv --model llama-3-8b --seq 2048 --json").out);
  CHECK_FALSE(dense[0].contains("groups"));
}

TEST_CASE("kvsim kv headlines what a hybrid model's groups hold, and rates the risk on it",
          "[cli][hybrid]") {
  // Gemma 3 27B at 8,192 tokens: 62 layers, 10 full and 52 sliding (window 1,024), 16 KV heads
  // of 128 in BF16 = 8,192 bytes a layer a token. Groups of 10 layers (52 > 1.5 x 10): one full,
  // six sliding (60 slots, 8 padding); a block is 10 x 16 x 8,192 = 1,310,720 bytes. Full: 512
  // blocks. Sliding: tokens before 8,192 - 1,024 + 1 = 7,169 are skipped, 448 whole blocks, so
  // 64 held in each of six groups = 384. (512 + 384) x 1,310,720 = 1,174,405,120 bytes; every
  // token's KV would be 8,192 x 62 x 8,192 = 4,160,749,568 (the 4.16 GB once headlined).
  // The risk from what is held: a batch of 4 on 60 GB with 54 GB of weights leaves
  // 6e9 - 4 x 1,174,405,120 = 1,302,379,520 bytes, 2.2% of the capacity: warning, where every
  // token's KV (4 x 4,160,749,568) would not fit at all (critical).
  auto r = run_cli(
      "kv --model gemma-3-27b --seq 8192 --batch 4 --capacity-gb 60 --weights-gb 54 "
      "--json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j[0]["kv_bytes_per_request"] == 1'174'405'120LL);
  CHECK(j[0]["kv_bytes_total"] == 4'697'620'480LL);
  CHECK(j[0]["every_token_kv_bytes_per_request"] == 4'160'749'568LL);
  CHECK(j[0]["remaining_bytes"] == 1'302'379'520LL);
  CHECK(j[0]["risk"] == "warning");
  auto human = run_cli("kv --model gemma-3-27b --seq 8192");
  REQUIRE(human.exit_code == 0);
  CHECK(human.out.find("1.17 / 1.09") != std::string::npos);  // GB / GiB of 1,174,405,120
  CHECK(human.out.find("4.16 / 3.88") == std::string::npos);
}

TEST_CASE("The hybrid what-ifs: the window's memory serves more at once than full attention's",
          "[cli][hybrid][e2e]") {
  for (const char* name : {"gpt-oss-120b-h100", "gemma-3-27b-window"}) {
    INFO(name);
    const std::string dir = make_temp_dir("kvsim-hybrid");
    auto r = run_cli("run -o '" + dir + "/out' '" + std::string(KVSIM_SOURCE_DIR) + "/scenarios/" +
                     name + ".yaml'");
    REQUIRE(r.exit_code == 0);
    auto j = nlohmann::json::parse(read_text(dir + "/out/summary.json"));
    const auto& hybrid = j["policies"][0];
    const auto& full = j["policies"][1];
    // The same pool in bytes (the blocks differ in size, the budget does not).
    const double ratio =
        hybrid["kv_pool_bytes"].get<double>() / full["kv_pool_bytes"].get<double>();
    CHECK(ratio == Approx(1.0).epsilon(0.001));
    CHECK(hybrid["ttft_s"]["p99"].get<double>() < full["ttft_s"]["p99"].get<double>());
    CHECK(hybrid["goodput_tokens_per_s"].get<double>() >
          full["goodput_tokens_per_s"].get<double>());
    CHECK(hybrid["preemptions"].get<int64_t>() <= full["preemptions"].get<int64_t>());
    CHECK(hybrid["outcomes"]["lost_oom"] == 0);
    std::filesystem::remove_all(dir);
  }
}
