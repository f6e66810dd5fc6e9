// End-to-end: `kvsim run --trace-request ID [--policy NAME]` (docs/trace-request.md) prints the
// request's life, the same with the fast-forward on and off, as tests/data/trace-request/ expects
// (its figures checked by hand in its README.md).
#include <catch2/catch.hpp>
#include <string>

#include "tests/cli/run_cli.h"

using Catch::Matchers::Contains;
using kvsim::test::read_text;
using kvsim::test::run_cli;

namespace {

const std::string kDir = std::string(KVSIM_SOURCE_DIR) + "/tests/data/trace-request";

// The trace: what the run prints after the comparison table, from the first heading on.
std::string trace_of(const std::string& out) {
  const auto at = out.find("request 2, policy ");
  return at == std::string::npos ? "(no trace)\n" + out : out.substr(at);
}

}  // namespace

TEST_CASE("kvsim run --trace-request prints a request's life, the same with --no-fast-forward",
          "[cli][trace_request][fast_forward]") {
  const std::string run = "run '" + kDir + "/scenario.yaml' --no-output --trace-request 2";
  const auto ff = run_cli(run);
  REQUIRE(ff.exit_code == 0);
  const auto step = run_cli(run + " --no-fast-forward");
  REQUIRE(step.exit_code == 0);
  CHECK(trace_of(ff.out) == read_text(kDir + "/both-policies.txt"));
  CHECK(trace_of(step.out) == trace_of(ff.out));
  // --policy: that policy's part only.
  const auto one = run_cli(run + " --policy swap");
  REQUIRE(one.exit_code == 0);
  const std::string both = read_text(kDir + "/both-policies.txt");
  CHECK(trace_of(one.out) == both.substr(both.find("request 2, policy swap:")));
}

TEST_CASE("kvsim run --trace-request: a request not in the traffic, bad flags",
          "[cli][trace_request]") {
  const std::string run = "run '" + kDir + "/scenario.yaml' --no-output";
  const auto none = run_cli(run + " --trace-request 99 --policy swap");
  REQUIRE(none.exit_code == 0);
  CHECK_THAT(none.out,
             Contains("request 99, policy swap:\n  (no such request in this policy's traffic)\n"));
  // A policy the scenario does not have: one line, exit 2, before any run.
  const auto bad = run_cli(run + " --trace-request 2 --policy nope");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err ==
        "kvsim: error: --policy 'nope': scenario trace-request has no such policy (its policies: "
        "recompute, swap)\n");
  // --policy needs --trace-request; --trace-request and --timeline exclude each other.
  CHECK(run_cli(run + " --policy swap").exit_code == 2);
  CHECK(run_cli(run + " --trace-request 2 --timeline /dev/null").exit_code == 2);
}
