// --dp and --ep of kvsim kv, kvsim latency and kvsim mem: figures per GPU of one data-parallel
// replica whose MoE layers share their experts (docs/models.md "Expert parallelism").
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.h"

using namespace kvsim::test;

TEST_CASE("kvsim kv --dp --ep: one DP + EP rank's weights and KV", "[cli][parallel][moe]") {
  // DeepSeek-V3 (FP8, 128 x 128 blocks) at DP 8 + EP holds 100,840,687,968 bytes a GPU (as
  // tests/cli/moe_scenario_cli_test.cc's dp8-ep policy) and every token's 70,272-byte latent:
  // at 4,096 tokens 287,834,112. An H200's 149,250,113,536 bytes leave 149,250,113,536 -
  // 100,840,687,968 - 287,834,112 = 48,121,591,456.
  auto r = run_cli("kv --model deepseek-v3 --gpu h200 --dp 8 --ep --seq 4096 --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j[0]["kv_bytes_per_request"] == 287'834'112LL);
  CHECK(j[0]["remaining_bytes"] == 48'121'591'456LL);
  auto human = run_cli("kv --model deepseek-v3 --gpu h200 --dp 8 --ep --seq 4096");
  CHECK(human.out.find("per GPU at DP 8 x TP 1 x PP 1 with EP (8 GPUs)") != std::string::npos);
  CHECK(human.out.find("weights 100,840,687,968 bytes") != std::string::npos);
  // Expert parallelism needs experts.
  auto dense = run_cli("kv --model llama-3-8b --ep");
  CHECK(dense.exit_code != 0);
  CHECK(dense.err.find("expert parallelism needs a mixture-of-experts model") != std::string::npos);
}

TEST_CASE("kvsim latency and kvsim mem take --dp and --ep", "[cli][parallel][moe]") {
  const auto decode_step = [](const std::string& flags) {
    auto r = run_cli("latency --model deepseek-v3 --gpu h200 --seq 4096 --batch 8 --json " + flags);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out)[0]["decode_step_s"].get<double>();
  };
  // Over 8 replicas each GPU reads an eighth of the routed experts' weights (a slice of each
  // without EP, 32 whole ones with it): its decode step is shorter than one GPU holding them all.
  const double one = decode_step("");
  CHECK(decode_step("--dp 8") < one);
  CHECK(decode_step("--dp 8 --ep") < one);
  CHECK(decode_step("--dp 8 --ep") != decode_step("--dp 8"));
  auto human = run_cli("latency --model deepseek-v3 --gpu h200 --seq 4096 --dp 8 --ep");
  CHECK(human.out.find("data parallel 8 with expert parallelism") != std::string::npos);
  auto mem = run_cli("mem --trace " + std::string(KVSIM_TEST_DATA) +
                     "/traces/azure-conv-2023.head2000.csv --model deepseek-v3 --gpu h200 "
                     "--store paged --dp 8 --ep");
  REQUIRE(mem.exit_code == 0);
  CHECK(mem.out.find("per GPU at DP 8 x TP 1 x PP 1 with EP (8 GPUs): 93.92 GiB of weights") !=
        std::string::npos);
}
