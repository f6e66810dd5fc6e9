// `kvsim capacity` from the command line: the table, capacity.csv, the figure, resume and errors.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/cli/figure_checks.h"
#include "tests/cli/run_cli.h"

namespace kvsim::test {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

const std::string kSerial = std::string(KVSIM_SOURCE_DIR) + "/tests/data/capacity/serial.yaml";

TEST_CASE("kvsim capacity: a search over two configurations, its figure, then a resume",
          "[cli][capacity]") {
  const std::string d = make_temp_dir("capacity-cli");
  const std::string cmd = fmt::format(
      "capacity {} --slo ttft_p99_s=1 --search workload.arrivals.rate --over "
      "engine.max_num_seqs=1,2 -o {} -j 2",
      kSerial, d);
  const auto r = run_cli(cmd);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("max workload.arrivals.rate"));
  CHECK_THAT(r.out,
             Contains("cheapest meeting the SLO at the scenario's load: engine.max_num_seqs=2"));
  const std::string csv = read_text(d + "/capacity.csv");
  CHECK(csv.rfind(
            "config,engine.max_num_seqs,priced_gpu,gpus,gpu_hour_usd,cost_per_hour_usd,max_load,",
            0) == 0);
  CHECK(fs::is_directory(d + "/search/0-max_num_seqs=1/round-00/points"));
  const auto again = run_cli(cmd);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.out, Contains("probes: 0 run,"));
  CHECK(read_text(d + "/capacity.csv") == csv);
  if (have_matplotlib()) {
    REQUIRE(run_cli(fmt::format("plot {}", d)).exit_code == 0);
    CHECK(fs::exists(d + "/plots/capacity.png"));
  }
  fs::remove_all(d);
}

TEST_CASE("kvsim capacity: a bad --slo or --over is one line and exit 2", "[cli][capacity]") {
  const std::string d = make_temp_dir("capacity-bad");
  auto r = run_cli(fmt::format("capacity {} --slo ttft_p98_s=1 -o {}", kSerial, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("unknown figure 'ttft_p98_s'"));
  r = run_cli(fmt::format("capacity {} --slo ttft_p99_s=1 --over gpu -o {}", kSerial, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("expected KEY=a,b,c"));
  r = run_cli(
      fmt::format("capacity {} --slo ttft_p99_s=1 --search workload.nope -o {}", kSerial, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--search workload.nope"));
  fs::remove_all(d);
}

}  // namespace
}  // namespace kvsim::test
