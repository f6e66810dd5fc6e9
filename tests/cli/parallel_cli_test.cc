// --tp / --pp / dtype flags of kvsim kv and kvsim latency, and a multi-GPU scenario's per-GPU
// summary. Figures derived in tests/models/parallelism_test.cc.
#include <catch2/catch.hpp>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.h"

using Catch::Matchers::Contains;
using kvsim::test::make_temp_dir;
using kvsim::test::read_text;
using kvsim::test::run_cli;

TEST_CASE("kvsim kv --tp gives KV and weights per GPU", "[cli][parallel]") {
  // Llama-3-70B at TP 4 on an H100: 81,920 bytes of KV per token per GPU (2 x 80 x 2 x 128 x 2)
  // and 35,278,831,616 bytes of weights. 8192 tokens: 671,088,640 bytes; left:
  // 85,018,877,624 - 35,278,831,616 - 671,088,640 = 49,068,957,368.
  auto r = run_cli("kv --model llama-3-70b --gpu h100-sxm --tp 4 --seq 8192 --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j[0]["kv_bytes_per_request"] == 671'088'640LL);
  CHECK(j[0]["remaining_bytes"] == 49'068'957'368LL);
  // FP8 KV halves it; TP 16 on llama-3-8b replicates its 8 KV heads (1 per GPU, as at TP 8).
  auto fp8 = run_cli("kv --model llama-3-70b --tp 4 --kv-dtype fp8 --seq 8192 --json");
  CHECK(nlohmann::json::parse(fp8.out)[0]["kv_bytes_per_request"] == 335'544'320LL);
  auto tp16 = run_cli("kv --model llama-3-8b --tp 16 --seq 1000 --json");
  auto tp8 = run_cli("kv --model llama-3-8b --tp 8 --seq 1000 --json");
  CHECK(nlohmann::json::parse(tp16.out)[0]["kv_bytes_per_request"] == 16'384'000LL);
  CHECK(tp16.out == tp8.out);
  // PP 2: 40 of the 80 layers per stage: half the KV per token.
  auto pp = run_cli("kv --model llama-3-70b --tp 4 --pp 2 --seq 8192 --json");
  CHECK(nlohmann::json::parse(pp.out)[0]["kv_bytes_per_request"] == 335'544'320LL);
  auto human = run_cli("kv --model llama-3-70b --tp 4 --pp 2 --seq 8192");
  CHECK_THAT(human.out, Contains("per GPU at TP 4 x PP 2 (8 GPUs)"));
  auto bad = run_cli("kv --model llama-3-8b --tp 3");
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.err, Contains("32 query heads do not split 3 ways"));
}

TEST_CASE("kvsim latency --pp and --weights-dtype", "[cli][parallel]") {
  auto r = run_cli("latency --model llama-3-70b --gpu h100-sxm --tp 4 --pp 2 --seq 1000");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("tensor parallel 4, pipeline parallel 2 (stages in turn)"));
  auto fp16 = run_cli("latency --model llama-3-8b --seq 1000 --json");
  auto int4 = run_cli("latency --model llama-3-8b --seq 1000 --weights-dtype int4 --json");
  REQUIRE(int4.exit_code == 0);
  // Decode of one sequence is bound by reading the weights: ~4x fewer bytes with INT4.
  const double d16 = nlohmann::json::parse(fp16.out)[0]["decode_step_s"].get<double>();
  const double d4 = nlohmann::json::parse(int4.out)[0]["decode_step_s"].get<double>();
  CHECK(d4 < 0.5 * d16);
  auto bad = run_cli("latency --weights-dtype int3");
  CHECK(bad.exit_code != 0);
}

TEST_CASE("scenarios/llama-3-70b-tp.yaml: 70B on 4 and 8 H100s, memory per GPU",
          "[cli][parallel][e2e]") {
  const std::string dir = make_temp_dir("kvsim-tp");
  auto r = run_cli("run -o '" + dir + "/out' '" + std::string(KVSIM_SOURCE_DIR) +
                   "/scenarios/llama-3-70b-tp.yaml'");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(read_text(dir + "/out/summary.json"));
  const auto& tp4 = j["policies"][0];
  CHECK(tp4["gpu_layout"]["gpus"] == 4);
  CHECK(tp4["gpu_layout"]["memory_figures"] == "per GPU");
  CHECK(tp4["gpu_layout"]["weights_bytes_per_gpu"] == 35'278'831'616LL);
  CHECK(tp4["category_peaks_bytes"]["weights"] == 35'278'831'616LL);
  CHECK(tp4["outcomes"]["lost_oom"] == 0);
  const auto& tp8 = j["policies"][1];
  CHECK(tp8["gpu_layout"]["gpus"] == 8);
  CHECK(tp8["gpu_layout"]["kv_bytes_per_token_per_gpu"] == 40'960);
  auto m = nlohmann::json::parse(read_text(dir + "/out/manifest.json"));
  CHECK(m["gpus_per_policy"]["tp4"] == 4);
  CHECK(m["memory_figures"] == "per GPU");
  // The same model on one H100 is refused.
  auto one = run_cli("run --no-output '" + std::string(KVSIM_SOURCE_DIR) +
                     "/scenarios/llama-3-70b-tp.yaml' --set engine.tensor_parallel=1");
  CHECK(one.exit_code != 0);
  CHECK_THAT(one.err, Contains("131.42 GiB of weights) does not fit on h100-sxm"));
  std::filesystem::remove_all(dir);
}
