// `--set` and error positions: a value a --set wrote is named by its --set and key (its line:col
// was the place in the --set text, labelled with the scenario's name: "file:1:1"), and a value the
// file wrote keeps its file:line:col whatever --set patched (every position read 1:1).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "tests/cli/run_cli.h"

using Catch::Matchers::Contains;
using kvsim::test::make_temp_dir;
using kvsim::test::run_cli;

TEST_CASE("errors from --set name the --set and the key; file errors keep their place",
          "[cli][bad-input][set]") {
  const std::string d = make_temp_dir("set-errors");
  const std::string f = d + "/bad-rate.yaml";
  // The rate is on line 5; its value starts at column 33.
  std::ofstream(f)
      << "name: t\nmodel: seed-7b-mha\ngpu: a100-sxm4-80gb\nworkload:\n"
         "  arrivals: {type: fixed, rate: -1}\n  max_requests: 2\n"
         "  prompt_tokens: 10\n  output_tokens: 2\npolicies: [{name: a, guards: []}]\n";
  auto r = run_cli("run --no-output '" + f + "' --set seed=3");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("bad-rate.yaml:5:33: workload.arrivals.rate: expected a number > 0"));
  r = run_cli("run --no-output '" + f + "' --set workload.arrivals.rate=abc");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("kvsim: error: --set workload.arrivals.rate=abc: "
                             "workload.arrivals.rate: expected a number"));
  r = run_cli("run --no-output '" + f +
              "' --set workload.arrivals.rate=2 --set engine.max_num_seqz=1");
  CHECK(r.exit_code == 2);
  CHECK_THAT(
      r.err,
      Contains("kvsim: error: --set engine.max_num_seqz=1: engine: unknown key 'max_num_seqz'"));
  std::filesystem::remove_all(d);
}
