// End-to-end: `kvsim latency` and `kvsim plausibility` as a user runs them, and the golden
// output of the plausibility check on seed B's table (tests/golden/plausibility_seed_b.json;
// KVSIM_UPDATE_GOLDEN=1 rewrites it: review the diff like code).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.h"

using Catch::Matchers::Contains;
using kvsim::test::run_cli;

namespace {

const std::string kSeedB = std::string(KVSIM_SOURCE_DIR) + "/scenarios/claims/seed-b.csv";
const std::string kGolden =
    std::string(KVSIM_SOURCE_DIR) + "/tests/golden/plausibility_seed_b.json";

// Strings, integers and verdicts exactly; floating-point numbers to a relative 1e-9.
void compare_json(const nlohmann::json& want, const nlohmann::json& got, const std::string& path) {
  INFO("at " << path);
  if (want.is_number_float() || got.is_number_float()) {
    REQUIRE(got.is_number());
    const double w = want.get<double>(), g = got.get<double>();
    CHECK(std::abs(w - g) <= 1e-9 * std::max(std::abs(w), std::abs(g)));
    return;
  }
  REQUIRE(want.type() == got.type());
  if (want.is_object()) {
    REQUIRE(want.size() == got.size());
    for (auto it = want.begin(); it != want.end(); ++it) {
      REQUIRE(got.contains(it.key()));
      compare_json(it.value(), got[it.key()], path + "." + it.key());
    }
  } else if (want.is_array()) {
    REQUIRE(want.size() == got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      compare_json(want[i], got[i], path + "[" + std::to_string(i) + "]");
    }
  } else {
    CHECK(want == got);
  }
}

}  // namespace

TEST_CASE("kvsim latency --json prints an object per sequence length", "[cli][latency]") {
  auto r = run_cli(
      "latency --model seed-7b-mha --gpu a100-sxm4-80gb --attention flash "
      "--seq 4096,16384,32768 --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.size() == 3);
  double prev = 0;
  for (const auto& o : j) {
    for (const char* key : {"seq_len", "batch", "prefill_s", "prefill_lower_bound_s", "ttft_s",
                            "decode_step_s", "decode_tokens_per_s"}) {
      CHECK(o.contains(key));
    }
    CHECK(o["prefill_lower_bound_s"].get<double>() <= o["prefill_s"].get<double>());
    CHECK(o["prefill_s"].get<double>() <= o["ttft_s"].get<double>());
    CHECK(o["decode_tokens_per_s"].get<double>() == Approx(1.0 / o["decode_step_s"].get<double>()));
    CHECK(o["prefill_s"].get<double>() > prev);
    prev = o["prefill_s"].get<double>();
    CHECK_FALSE(o.contains("prefill_ops"));
  }
  CHECK(j[1]["seq_len"] == 16384);
  // 16,384 tokens of a 7B model need > 0.9 s at 312 TFLOP/s (facts.md 7).
  CHECK(j[1]["prefill_lower_bound_s"].get<double>() > 0.9);
  // Deterministic: byte-identical on a second run.
  CHECK(run_cli("latency --seq 4096,16384,32768 --json").out == r.out);
}

// `--batch 1,8` is the two single-batch runs side by side: each (seq_len, batch) row equals the
// row `--batch B` alone prints, and the table gains a batch column.
TEST_CASE("kvsim latency --batch takes a list: one row per (seq_len, batch)", "[cli][latency]") {
  auto r = run_cli("latency --seq 4096,16384 --batch 1,8 --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.size() == 4);
  const auto human = run_cli("latency --seq 4096,16384 --batch 1,8");
  REQUIRE(human.exit_code == 0);
  CHECK_THAT(human.out, Contains("), batch 1, 8\n"));
  CHECK_THAT(human.out, Contains("seq_len  batch  prefill ms"));
  size_t i = 0;
  for (int64_t seq : {4096, 16384}) {
    for (int64_t batch : {1, 8}) {
      INFO("seq " << seq << " batch " << batch);
      const auto& row = j[i++];
      CHECK(row["seq_len"] == seq);
      CHECK(row["batch"] == batch);
      const auto one = run_cli(fmt::format("latency --seq {} --batch {} --json", seq, batch));
      REQUIRE(one.exit_code == 0);
      CHECK(row == nlohmann::json::parse(one.out)[0]);  // the same numbers, exactly
      // ... and the table prints that decode time (ms per token, 2 decimals).
      CHECK_THAT(human.out,
                 Contains(fmt::format("{:.2f}", row["decode_step_s"].get<double>() * 1e3)));
    }
  }
  // Eight sequences per decode step: the step is slower, the throughput higher.
  CHECK(j[1]["decode_step_s"].get<double>() > j[0]["decode_step_s"].get<double>());
  CHECK(j[1]["decode_tokens_per_s"].get<double>() > j[0]["decode_tokens_per_s"].get<double>());
  // One batch size: the table keeps its one-row-per-seq_len shape, no batch column.
  const auto single = run_cli("latency --seq 4096 --batch 8");
  REQUIRE(single.exit_code == 0);
  CHECK_THAT(single.out, Contains("), batch 8\n"));
  CHECK_THAT(single.out, Contains("seq_len  prefill ms"));
  CHECK(run_cli("latency --batch 1,0").exit_code == 2);
}

TEST_CASE("kvsim latency --verbose prints the per-operation breakdown", "[cli][latency]") {
  auto r = run_cli(
      "latency --seq 4096 --attention native --kv-heads 8 --batch 2 --block-size 16 "
      "--verbose");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("32 query / 8 KV heads"));
  CHECK_THAT(r.out, Contains("paged (16-token blocks)"));
  for (const char* op : {"qkv_proj", "attention_prefill", "attention_native", "attention_decode",
                         "mlp_gate_up", "mlp_down", "lm_head", "compute", "memory"}) {
    CHECK_THAT(r.out, Contains(op));
  }
  auto j = run_cli("latency --seq 100 --tp 2 --model llama-3-70b --gpu h100-sxm --verbose --json");
  REQUIRE(j.exit_code == 0);
  auto o = nlohmann::json::parse(j.out)[0];
  bool allreduce = false;
  for (const auto& op : o["prefill_ops"]) allreduce = allreduce || op["name"] == "allreduce";
  CHECK(allreduce);
}

TEST_CASE("kvsim latency reads a profile and rejects bad ones with a position", "[cli][latency]") {
  const std::string dir = kvsim::test::make_temp_dir("kvsim-lat");
  {
    std::ofstream(dir + "/slow.yaml") << "gpu: a100-sxm4-80gb\nclasses:\n  attention_flash:\n"
                                         "    compute_efficiency: 0.365\n";
    std::ofstream(dir + "/bad.yaml") << "classes:\n  gemm:\n    memory_efficiency: two\n";
    std::ofstream(dir + "/h100.yaml") << "gpu: h100-sxm\n";
  }
  auto base = nlohmann::json::parse(run_cli("latency --seq 16384 --json").out)[0];
  auto slow = run_cli("latency --seq 16384 --json --profile " + dir + "/slow.yaml");
  REQUIRE(slow.exit_code == 0);
  auto s = nlohmann::json::parse(slow.out)[0];
  CHECK(s["prefill_s"].get<double>() > base["prefill_s"].get<double>());
  CHECK(s["prefill_lower_bound_s"] == base["prefill_lower_bound_s"]);  // bounds ignore profiles
  CHECK(s["decode_step_s"] == base["decode_step_s"]);                  // decode has no flash op
  auto bad = run_cli("latency --profile " + dir + "/bad.yaml");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("bad.yaml:3:24: classes.gemm.memory_efficiency"));
  auto other = run_cli("latency --profile " + dir + "/h100.yaml");
  CHECK(other.exit_code == 2);
  CHECK_THAT(other.err, Contains("describes GPU 'h100-sxm', not 'a100-sxm4-80gb'"));
}

TEST_CASE("kvsim latency rejects bad arguments with exit code 2", "[cli][latency]") {
  CHECK(run_cli("latency --attention fast").exit_code == 2);
  auto kv = run_cli("latency --kv-heads 3");
  CHECK(kv.exit_code == 2);
  CHECK_THAT(kv.err, Contains("--kv-heads 3: expected a divisor"));
  CHECK(run_cli("latency --seq 0").exit_code == 2);
  CHECK(run_cli("latency --model nope").exit_code == 2);
  auto tp = run_cli("latency --tp 3");
  CHECK(tp.exit_code == 2);
  CHECK_THAT(tp.err, Contains("cannot be split 3 ways"));
}

TEST_CASE("kvsim plausibility on seed B's table matches the golden output", "[cli][golden]") {
  auto r = run_cli("plausibility --json '" + kSeedB + "'");
  REQUIRE(r.exit_code == 0);
  auto got = nlohmann::json::parse(r.out);
  if (std::getenv("KVSIM_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(kGolden) << r.out;
    WARN("rewrote " << kGolden);
  }
  auto want = nlohmann::json::parse(kvsim::test::read_text(kGolden));
  compare_json(want, got, "");
  REQUIRE(got.size() == 15);
  for (const auto& o : got) {
    for (const char* key : {"metric", "seq_len", "claimed", "lower_bound", "estimate", "verdict"}) {
      CHECK(o.contains(key));
    }
  }
  CHECK(got[6]["metric"] == "prefill_ms");
  CHECK(got[6]["claimed"].get<double>() == Approx(0.2104));
  CHECK(got[6]["verdict"] == "impossible");
}

TEST_CASE("kvsim plausibility prints verdicts and the arithmetic", "[cli][plausibility]") {
  auto r = run_cli("plausibility '" + kSeedB + "'");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("impossible"));
  CHECK_THAT(r.out, Contains("plausible"));
  CHECK_THAT(r.out, Contains("line 14: prefill of 16,384 tokens = 2.826e+14 FLOPs -> >= 905.9 ms "
                             "at 312 TFLOP/s"));
  CHECK_THAT(r.out, Contains("210.4 ms implies 1343 TFLOP/s = 431% of peak"));
}

TEST_CASE("kvsim plausibility names the file and line of a bad row", "[cli][plausibility]") {
  const std::string dir = kvsim::test::make_temp_dir("kvsim-claims");
  std::ofstream(dir + "/bad.csv")
      << "label,model,gpu,attention,kv_heads,block_size,seq_len,batch,metric,value\n"
      << "ok,llama-3-8b,a100-sxm4-80gb,flash,,0,1024,1,prefill_ms,100\n"
      << "bad,llama-3-8b,a100-sxm4-80gb,flash,,0,1024,1,prefill_ms,fast\n";
  auto r = run_cli("plausibility '" + dir + "/bad.csv'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("bad.csv:3: column 'value': expected a number > 0, got \"fast\""));
  CHECK(run_cli("plausibility '" + dir + "/missing.csv'").exit_code == 2);
  CHECK(run_cli("plausibility").exit_code == 2);
}
