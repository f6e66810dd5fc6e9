// End-to-end: `kvsim run` on the embedded default and on every shipped scenario.
#include <catch2/catch.hpp>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.h"
#include "tests/sanitizer.h"

using Catch::Matchers::Contains;
using kvsim::test::make_temp_dir;
using kvsim::test::read_text;
using kvsim::test::run_cli;
namespace fs = std::filesystem;

TEST_CASE("kvsim run with no arguments shows OOM, truncation, rejection and a policy with none",
          "[cli][e2e]") {
  // The embedded default (scenarios/mixed-chat-docs.yaml): the story the product card names.
  const std::string dir = make_temp_dir("kvsim-run");
  auto r = run_cli("run -o '" + dir + "/out'");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("mixed-chat-docs"));
  auto j = nlohmann::json::parse(read_text(dir + "/out/summary.json"));
  const auto& pols = j["policies"];
  REQUIRE(pols.size() == 5);
  const auto& none = pols[0];
  CHECK(none["name"] == "no-guard");  // OOM: crashes lose requests
  CHECK(none["oom_events"].get<int>() > 0);
  CHECK(none["outcomes"]["lost_oom"].get<int>() > 0);
  const auto& truncate = pols[1];  // truncation, with tokens dropped
  CHECK(truncate["name"] == "guard-truncate");
  CHECK(truncate["outcomes"]["completed_truncated"].get<int>() > 0);
  CHECK(truncate["tokens_dropped"].get<int64_t>() > 0);
  const auto& reject = pols[2];  // rejection, and no crash
  CHECK(reject["name"] == "guard-reject");
  CHECK(reject["outcomes"]["rejected"].get<int>() > 0);
  CHECK(reject["oom_events"] == 0);
  const auto& paged = pols[4];  // none of the three, every request served, at a latency cost
  CHECK(paged["name"] == "vllm-paged");
  CHECK(paged["outcomes"]["completed"] == paged["requests_total"]);
  CHECK(paged["oom_events"] == 0);
  CHECK(paged["e2e_s"]["p99"].get<double>() > reject["e2e_s"]["p99"].get<double>());
  for (const auto& p : pols) {
    int64_t total = 0;
    for (const auto& [k, v] : p["outcomes"].items()) total += v.get<int64_t>();
    CHECK(total == p["requests_total"].get<int64_t>());
  }
  for (const char* f : {"manifest.json", "summary.csv", "requests.csv", "timeseries.csv"}) {
    CHECK(fs::exists(fs::path(dir) / "out" / f));
  }
  fs::remove_all(dir);
}

// The fast-forward (docs/architecture.md) must not show in any result: every shipped scenario
// writes the same bytes with --no-fast-forward (stepping every iteration) as without. (That every
// shipped scenario runs, silently, is the goldens' first check: tests/golden.)
TEST_CASE("every scenario in scenarios/ writes identical files with --no-fast-forward",
          "[cli][e2e][scenarios][fast_forward]") {
  KVSIM_SKIP_UNDER_SANITIZER(
      "a repeat of the Release stage's check; under ASan the goldens run every scenario and the "
      "engine suite steps the random ones with the fast-forward on and off");
  const std::string dir = make_temp_dir("kvsim-ff");
  for (const auto& e : fs::directory_iterator(fs::path(KVSIM_SOURCE_DIR) / "scenarios")) {
    if (e.path().extension() != ".yaml") continue;
    INFO("scenario " << e.path().filename());
    const std::string stem = dir + "/" + e.path().stem().string();
    auto ff = run_cli("run -o '" + stem + "-ff' '" + e.path().string() + "'");
    auto step = run_cli("run --no-fast-forward -o '" + stem + "-step' '" + e.path().string() + "'");
    REQUIRE(ff.exit_code == 0);
    REQUIRE(step.exit_code == 0);
    for (const char* f :
         {"summary.json", "summary.csv", "requests.csv", "timeseries.csv", "manifest.json"}) {
      INFO(f);
      CHECK(kvsim::test::read_text(stem + "-ff/" + f) ==
            kvsim::test::read_text(stem + "-step/" + f));
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("run --set overrides a key; a bad path is a clean error", "[cli]") {
  auto r = run_cli("run --no-output --set policies.0.name=renamed --set workload.duration_s=30");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("renamed"));
  auto bad = run_cli("run --no-output --set policies.9.name=x");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("index 9 past the end"));
}
