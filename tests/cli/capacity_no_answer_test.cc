// `kvsim capacity --search` when the search has no answer: an SLO no load meets, or one every load
// meets. Each says so in terms of the load, one line, exit 2, and removes the folder it made.
// Before: the first halved the rate until a probe hit --max-sim-time (leaving 408 MB of probes);
// the second doubled it until the scenario refused the made-up rate, blaming the scenario file
// ("chat.yaml:1:1: workload.arrivals.rate ... got 1.07e+09").
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/cli/run_cli.h"

namespace kvsim::test {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

const std::string kSerialScenario =
    std::string(KVSIM_SOURCE_DIR) + "/tests/data/capacity/serial.yaml";

TEST_CASE("kvsim capacity --search: an SLO no load meets", "[cli][capacity][bad-input]") {
  const std::string d = make_temp_dir("capacity-none") + "/out";
  const auto r = run_cli(
      fmt::format("capacity {} --slo ttft_p99_s=0 --search workload.arrivals.rate -o {} -j 2",
                  kSerialScenario, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             Contains("no load meets the SLO: at the lowest workload.arrivals.rate tried, "));
  CHECK_THAT(r.err, Contains("ttft_p99_s "));
  CHECK_THAT(r.err, Contains(" > 0"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(!fs::exists(d));  // the folder this run made is gone
  fs::remove_all(fs::path(d).parent_path());
}

TEST_CASE("kvsim capacity --search: an SLO every load meets", "[cli][capacity][bad-input]") {
  const std::string d = make_temp_dir("capacity-all") + "/out";
  const auto r = run_cli(
      fmt::format("capacity {} --slo ttft_p99_s=1e12 --search workload.arrivals.rate -o {} -j 2",
                  kSerialScenario, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("every load tried meets the SLO, up to workload.arrivals.rate = "));
  CHECK_THAT(r.err, !Contains("serial.yaml:"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(!fs::exists(d));
  fs::remove_all(fs::path(d).parent_path());
}

TEST_CASE("a capacity search that fails in a folder that was there says what it left",
          "[cli][capacity][bad-input]") {
  const std::string d = make_temp_dir("capacity-kept");
  const auto r = run_cli(
      fmt::format("capacity {} --slo ttft_p99_s=0 --search workload.arrivals.rate -o {} -j 2",
                  kSerialScenario, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains(fmt::format("(the probes run so far stay in {}/ for a resume)", d)));
  CHECK(fs::is_directory(d + "/search"));
  fs::remove_all(d);
}

}  // namespace
}  // namespace kvsim::test
