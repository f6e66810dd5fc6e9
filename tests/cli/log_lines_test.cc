// Engine log lines give simulated times in seconds, not raw nanoseconds.
#include <catch2/catch.hpp>

#include <regex>

#include "tests/cli/run_cli.h"

using kvsim::test::run_cli;

// native-vs-flash.yaml: one 32k prompt arrives at t = 1 s (fixed arrivals at rate 1) and its
// native-attention prefill OOMs in the first iteration, at its arrival: "t=1.000000s".
TEST_CASE("an OOM's log line gives the simulated time in seconds", "[cli][log]") {
  const auto r =
      run_cli("--log-level info run '" KVSIM_SOURCE_DIR "/scenarios/native-vs-flash.yaml'");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("engine: t=1.000000s OOM on req=0:") != std::string::npos);
  CHECK_FALSE(std::regex_search(r.err, std::regex("t=[0-9]{7,} ")));  // no raw nanoseconds
}
