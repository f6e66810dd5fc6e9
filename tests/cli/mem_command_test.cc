// End-to-end: `kvsim mem` replays a shipped trace through each KV store.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.h"

using kvsim::test::run_cli;
using Catch::Matchers::Contains;

namespace {
const std::string kTrace = std::string(KVSIM_TEST_DATA) + "/traces/azure-conv-2023.head2000.csv";
}

TEST_CASE("kvsim mem --json reports the waste of one store", "[cli][mem]") {
  auto r = run_cli("mem --trace " + kTrace + " --store paged --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"store", "requests", "peak_kv_bytes", "usage_efficiency",
                          "internal_waste_fraction", "reservation_waste_fraction",
                          "external_waste_fraction", "alloc_failures"}) {
    CHECK(j.contains(key));
  }
  CHECK(j["store"] == "paged");
  CHECK(j["requests"] == 2000);
  CHECK(j["usage_efficiency"].get<double>() > 0.96);
  CHECK(j["usage_efficiency"].get<double>() <= 1.0);
  CHECK(j["peak_kv_bytes"].get<int64_t>() > 0);
}

TEST_CASE("kvsim mem: max_len reservation is mostly waste; output is deterministic", "[cli][mem]") {
  const std::string args = "mem --trace " + kTrace + " --store contiguous --json";
  auto a = run_cli(args);
  REQUIRE(a.exit_code == 0);
  auto j = nlohmann::json::parse(a.out);
  CHECK(j["usage_efficiency"].get<double>() < 0.5);
  const double sum = j["usage_efficiency"].get<double>() + j["internal_waste_fraction"].get<double>() +
                     j["reservation_waste_fraction"].get<double>() +
                     j["external_waste_fraction"].get<double>();
  CHECK(sum == Approx(1.0));
  CHECK(run_cli(args).out == a.out);
}

TEST_CASE("kvsim mem prints a table for all three stores", "[cli][mem]") {
  auto r = run_cli("mem --trace " + kTrace + " --max-inflight 32");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("paged") && Contains("contiguous") && Contains("caching_allocator"));
  CHECK_THAT(r.out, Contains("token states %"));
}

TEST_CASE("kvsim mem rejects bad input with exit code 2", "[cli][mem]") {
  auto missing = run_cli("mem --trace /nonexistent/trace.csv");
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Contains("/nonexistent/trace.csv"));
  auto store = run_cli("mem --trace " + kTrace + " --store buddy");
  CHECK(store.exit_code == 2);
  auto model = run_cli("mem --trace " + kTrace + " --model llama-3-8");
  CHECK(model.exit_code == 2);
  CHECK_THAT(model.err, Contains("did you mean"));
}
