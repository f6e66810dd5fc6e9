// `kvsim run --max-wall-s`: a run cut short by the wall clock exits 0 and
// writes valid, partial-marked files.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.h"

using Catch::Matchers::Contains;
using kvsim::test::make_temp_dir;
using kvsim::test::read_text;
using kvsim::test::run_cli;
namespace fs = std::filesystem;

TEST_CASE("kvsim run --max-wall-s stops a long run cleanly with partial results", "[cli][e2e]") {
  // mixed-chat-docs stretched to 10 hours (~36,000 requests per policy at 1/s): minutes of work.
  // 0.05 s of wall has passed by the first poll of at least the later policies (every 4,096
  // events; a policy of 36,000 arrivals has more), so every policy stops with requests in flight:
  // outcomes + in_flight_at_stop = requests_total, and requests.csv holds one row per outcome.
  const std::string dir = make_temp_dir("kvsim-max-wall");
  const std::string scenario = std::string(KVSIM_SOURCE_DIR) + "/scenarios/mixed-chat-docs.yaml";
  auto r = run_cli("run '" + scenario + "' --set workload.duration_s=36000 --max-wall-s 0.05 -o '" +
                   dir + "/out'");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("--max-wall-s 0.05 reached"));
  CHECK(r.err.find("\r") == std::string::npos);  // stderr is no terminal: no progress line
  const auto j = nlohmann::json::parse(read_text(dir + "/out/summary.json"));
  int64_t rows_expected = 0;
  for (const auto& p : j["policies"]) {
    INFO("policy " << p["name"]);
    CHECK(p["partial"] == "max_wall_s");
    int64_t outcomes = 0;
    for (const auto& [k, v] : p["outcomes"].items()) outcomes += v.get<int64_t>();
    CHECK(outcomes + p["in_flight_at_stop"].get<int64_t>() == p["requests_total"].get<int64_t>());
    CHECK(p["requests_total"].get<int64_t>() < 36000);
    CHECK_FALSE(p.contains("latency_percentiles"));  // far below the exact limit
    rows_expected += outcomes;
  }
  std::ifstream csv(dir + "/out/requests.csv");
  int64_t lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  CHECK(lines == rows_expected + 1);  // + the header
  CHECK(fs::exists(dir + "/out/manifest.json"));
}
