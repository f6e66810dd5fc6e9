// `kvsim kv|latency|plausibility --plot FILE` end to end: the command writes its numbers beside
// FILE as JSON and scripts/kvsim_plot/ draws FILE from them; each figure is checked to be a PNG
// of the one-column size that is not blank, byte-identical on a second render, and drawn from
// the exact numbers the command printed. Needs Debian's python3-matplotlib; without it these
// tests show as Skipped in ctest (tests/test_skip.h).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/figure_checks.h"
#include "tests/cli/run_cli.h"
#include "tests/sanitizer.h"

namespace fs = std::filesystem;
using kvsim::test::make_temp_dir;
using kvsim::test::not_blank;
using kvsim::test::png_size;
using kvsim::test::read_text;
using kvsim::test::run_cli;

namespace {

// Runs `command --plot DIR/a/NAME.png` and again into DIR/b; checks the figure and returns the
// data JSON the command wrote beside it.
nlohmann::json plot_twice(const std::string& command, const std::string& name) {
  const std::string tmp = make_temp_dir("kvsim-plot-calc");
  for (const char* sub : {"a", "b"}) {
    const auto r = run_cli(command + " --plot '" + tmp + "/" + sub + "/" + name + ".png'");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("figure: " + tmp + "/" + sub + "/" + name + ".png") != std::string::npos);
  }
  const std::string a = read_text(tmp + "/a/" + name + ".png");
  const auto [width, height] = png_size(a);
  CHECK(width == 700);  // one column: 3.5 in at 200 dpi
  CHECK(height >= 300);
  CHECK(not_blank(tmp + "/a/" + name + ".png"));
  CHECK(a == read_text(tmp + "/b/" + name + ".png"));
  const std::string caption = read_text(tmp + "/a/" + name + ".txt");
  CHECK(caption.find("source: " + name + ".json") != std::string::npos);
  CHECK(caption.find("data_sha256: ") != std::string::npos);
  const nlohmann::json data = nlohmann::json::parse(read_text(tmp + "/a/" + name + ".json"));
  fs::remove_all(tmp);
  return data;
}

}  // namespace

TEST_CASE("kv --plot draws MHA, GQA and MQA KV bytes with the capacity left after weights") {
  KVSIM_SKIP_UNDER_SANITIZER(kvsim::test::kFigureTimeIsPythons);
  REQUIRE_MATPLOTLIB();
  const auto d = plot_twice("kv --model seed-7b-mha --gpu a100-sxm4-80gb --seq 4096,1024", "kv");
  CHECK(d["kind"] == "kv");
  CHECK(d["seq_lens"] == nlohmann::json::array({1024, 4096}));  // sorted for the x axis
  REQUIRE(d["variants"].size() == 3);
  // 32 layers x 2 (K and V) x head dim 128 x 2 bytes (fp16) = 16,384 bytes per KV head per token.
  CHECK(d["variants"][0]["name"] == "MHA");
  CHECK(d["variants"][0]["kv_heads"] == 32);
  CHECK(d["variants"][0]["kv_bytes"][1] == int64_t{4096} * 32 * 16384);
  CHECK(d["variants"][1]["name"] == "GQA");
  CHECK(d["variants"][1]["kv_heads"] == 8);  // an MHA model's GQA what-if: heads / 4
  CHECK(d["variants"][1]["kv_bytes"][1] == int64_t{4096} * 8 * 16384);
  CHECK(d["variants"][2]["name"] == "MQA");
  CHECK(d["variants"][2]["kv_bytes"][0] == int64_t{1024} * 16384);
  CHECK(d["capacity_bytes"].get<int64_t>() > d["weights_bytes"].get<int64_t>());

  // A GQA model keeps its own group; without --gpu/--capacity-gb there is no capacity line.
  const auto g = plot_twice("kv --model llama-3-70b --batch 4", "kv_gqa");
  CHECK(g["variants"][0]["kv_heads"] == 64);
  CHECK(g["variants"][1]["kv_heads"] == 8);
  CHECK(g["variants"][2]["kv_heads"] == 1);
  CHECK(g["capacity_bytes"].is_null());
  CHECK(g["batch"] == 4);
}

TEST_CASE("latency --plot draws estimate and bound for prefill and decode by sequence length") {
  KVSIM_SKIP_UNDER_SANITIZER(kvsim::test::kFigureTimeIsPythons);
  REQUIRE_MATPLOTLIB();
  const auto d = plot_twice("latency --seq 1024,4096,16384", "latency");
  CHECK(d["kind"] == "latency");
  REQUIRE(d["rows"].size() == 3);
  for (const auto& r : d["rows"]) {
    CHECK(r["prefill_s"].get<double>() >= r["prefill_lower_bound_s"].get<double>());
    CHECK(r["decode_step_s"].get<double>() >= r["decode_step_lower_bound_s"].get<double>());
  }
}

TEST_CASE("latency --batch 1,8 --plot draws a line per batch size") {
  KVSIM_SKIP_UNDER_SANITIZER(kvsim::test::kFigureTimeIsPythons);
  REQUIRE_MATPLOTLIB();
  const auto d = plot_twice("latency --seq 1024,4096 --batch 1,8", "latency_batches");
  CHECK(d["batch"] == nlohmann::json::parse("[1, 8]"));  // one batch size stays a number
  REQUIRE(d["rows"].size() == 4);
  CHECK(d["rows"][1]["batch"] == 8);
}

TEST_CASE("plausibility --plot draws every claim against kvsim's estimate and the bound") {
  KVSIM_SKIP_UNDER_SANITIZER(kvsim::test::kFigureTimeIsPythons);
  REQUIRE_MATPLOTLIB();
  const std::string claims = std::string(KVSIM_SOURCE_DIR) + "/scenarios/claims/seed-b.csv";
  const auto d = plot_twice("plausibility '" + claims + "'", "claims");
  CHECK(d["kind"] == "plausibility");
  CHECK(d["claims"].size() == 15);
  size_t impossible = 0;
  for (const auto& c : d["claims"]) impossible += c["verdict"] == "impossible";
  CHECK(impossible > 0);  // seed B's FA2 prefill figures beat the hardware
}

TEST_CASE("a calculator with --json and --plot keeps stdout one JSON document") {
  REQUIRE_MATPLOTLIB();
  const std::string tmp = make_temp_dir("kvsim-plot-calc-json");
  const auto r = run_cli("kv --json --plot '" + tmp + "/kv.svg'");
  REQUIRE(r.exit_code == 0);
  CHECK(nlohmann::json::parse(r.out).is_array());
  CHECK(read_text(tmp + "/kv.svg").find("<svg") != std::string::npos);
  fs::remove_all(tmp);
}

TEST_CASE("a calculator's --plot refuses a name not .png, .svg or .pdf before any work") {
  for (const std::string cmd : {"kv", "latency"}) {
    INFO(cmd);
    const auto r = run_cli(cmd + " --plot /tmp/kvsim-figure.gif");
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("expected a .png, .svg or .pdf") != std::string::npos);
  }
}
