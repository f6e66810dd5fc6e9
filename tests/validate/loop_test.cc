#include <catch2/catch.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "models/latency/profile.h"
#include "tests/validate/shell.h"
#include "validate/commands.h"
#include "validate/measurements.h"

using namespace kvsim;
using namespace kvsim::validate;

TEST_CASE("CPU backend: measure -> calibrate -> compare on cpu-tiny", "[validate][loop]") {
  const auto dir = test::fresh_dir("kvsim-loop");
  const int failed =
      run_measure({.grid = std::string(KVSIM_SOURCE_DIR) + "/validate/grids/cpu-tiny.yaml",
                   .backend = "cpu",
                   .out_dir = dir,
                   .quiet = true});
  CHECK(failed == 0);
  run_calibrate({.dir = dir, .profile = dir / "profile.yaml", .quiet = true});
  const double mape = run_compare({.dir = dir, .profile = dir / "profile.yaml", .quiet = true});
  // Its wall time (under 30 s here) is a benchmark figure, not asserted: machines are shared.

  const std::vector<Measurement> rows = read_measurements(dir / "measurements.csv");
  int checked = 0;
  for (const Measurement& m : rows) {
    CHECK(m.timed());
    CHECK(m.check != "fail");
    checked += m.check == "pass" ? 1 : 0;
  }
  CHECK(checked > 20);
  const auto manifest = nlohmann::json::parse(test::slurp(dir / "manifest.json"));
  CHECK(manifest["backend"] == "cpu");
  CHECK(manifest["gpu_spec"]["from"] == "nominal");

  // The profile is in the latency model's own format: it loads, and names no GPU (nominal peaks).
  const Profile p = load_profile(dir / "profile.yaml");
  CHECK(p.gpu.empty());
  CHECK_THAT(p.of(OpClass::kAttentionFlash).source, Catch::Matchers::Contains("train points"));

  const auto cmp = nlohmann::json::parse(test::slurp(dir / "compare.json"));
  REQUIRE(cmp.contains("mape"));
  CHECK(cmp["mape"].get<double>() == Approx(mape));
  CHECK(cmp["mape"].get<double>() >= 0.0);
  for (const char* c : {"native", "flash", "paged_decode", "gemm", "membw_copy"}) {
    INFO(c);
    REQUIRE(cmp["by_class"].contains(c));
    CHECK(cmp["by_class"][c].get<double>() >= 0.0);
  }
  CHECK(
      test::slurp(dir / "compare.csv").rfind("kernel,case,measured_s,predicted_s,error_pct\n", 0) ==
      0);

  // And `kvsim latency` runs with it.
  const test::Shell lat = test::shell(
      test::kvsim_bin() + "latency --model llama-3-8b --gpu a100-sxm4-80gb --seq 1024 --profile '" +
      (dir / "profile.yaml").string() + "'");
  INFO(lat.err);
  CHECK(lat.exit_code == 0);
  CHECK_THAT(lat.out, Catch::Matchers::Contains("cpu-host-calibrated"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("the binary's subcommands run, and bad input exits 2 with one line", "[validate][cli]") {
  const auto dir = test::fresh_dir("kvsim-cli");
  const std::string grid = std::string(KVSIM_SOURCE_DIR) + "/validate/grids/cpu-tiny.yaml";
  const test::Shell m = test::shell(test::validate_bin() + "measure --grid '" + grid +
                                    "' --backend cpu -o '" + dir.string() + "'");
  INFO(m.err);
  REQUIRE(m.exit_code == 0);
  CHECK_THAT(m.out, Catch::Matchers::Contains("measure: grid cpu-tiny"));
  const test::Shell mp =
      test::shell(test::validate_bin() + "memprobe --backend cpu -o '" + dir.string() + "'");
  CHECK(mp.exit_code == 0);
  CHECK_THAT(mp.out, Catch::Matchers::Contains("CPU run"));
  const auto probe = nlohmann::json::parse(test::slurp(dir / "memprobe.json"));
  CHECK(probe["kv_patterns"][0]["tensor_bytes"] == 4096 * 8 * 128 * 2);  // llama-3-8b, 4096 tokens
  CHECK(test::shell(test::validate_bin() + "calibrate '" + dir.string() + "' -o '" +
                    (dir / "p.yaml").string() + "'")
            .exit_code == 0);
  CHECK(test::shell(test::validate_bin() + "compare '" + dir.string() + "' --profile '" +
                    (dir / "p.yaml").string() + "'")
            .exit_code == 0);

  std::ofstream(dir / "bad.yaml")
      << "name: bad\nkernels:\n  - {class: gemm, m: [1], n: [two], k: [4]}\n";
  const test::Shell bad = test::shell(test::validate_bin() + "measure --grid '" +
                                      (dir / "bad.yaml").string() + "' -o '" + dir.string() + "'");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Matchers::Contains("bad.yaml:3:"));
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);
  const test::Shell nodir =
      test::shell(test::validate_bin() + "compare '" + (dir / "nope").string() + "' --profile '" +
                  (dir / "p.yaml").string() + "'");
  CHECK(nodir.exit_code == 2);
  std::filesystem::create_directories(dir / "empty");
  const test::Shell empty =
      test::shell(test::validate_bin() + "calibrate '" + (dir / "empty").string() + "' -o '" +
                  (dir / "x.yaml").string() + "'");
  CHECK(empty.exit_code == 2);
  CHECK_THAT(empty.err, Catch::Matchers::Contains("measurements.csv"));
  std::filesystem::remove_all(dir);
}
