// Sweep points and capacity probes name where a bad value was written, as `kvsim run` does: a
// value a --set wrote by its --set and key, a value of a sweep list by its place in the list, an
// --over value by its --over, and a value the file wrote by its file:line:col. Each point and
// probe is a copy of the scenario (a copy's nodes have no position), so before, every such error
// read "file:1:1".
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/cli/run_cli.h"

namespace kvsim::test {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

// max_requests is on line 8, its value at column 17; the sweep's 0 on line 16, column 32.
const char* kSetErrorsSweep =
    "name: t\n"
    "seed: 3\n"
    "model: seed-7b-mha\n"
    "gpu: a100-sxm4-80gb\n"
    "engine: {kv: {type: paged, block_size: 16}}\n"
    "workload:\n"
    "  arrivals: {type: fixed, rate: 4}\n"
    "  max_requests: MAX\n"
    "  prompt_tokens: 100\n"
    "  output_tokens: 4\n"
    "policies:\n"
    "  - name: none\n"
    "    guards: []\n"
    "sweep:\n"
    "  grid:\n"
    "    engine.kv.block_size: [16, BLOCK]\n";

std::string write_set_errors_scenario(const std::string& dir, const std::string& max_requests,
                                      const std::string& block) {
  std::string text = kSetErrorsSweep;
  text.replace(text.find("MAX"), 3, max_requests);
  text.replace(text.find("BLOCK"), 5, block);
  const std::string path = dir + "/s.yaml";
  std::ofstream(path) << text;
  return path;
}

TEST_CASE("sweep points: errors name the --set, the sweep value or the file's line:col",
          "[cli][sweep][bad-input][set]") {
  const std::string d = make_temp_dir("sweep-set-errors");
  std::string f = write_set_errors_scenario(d, "4", "32");
  auto r = run_cli(
      fmt::format("sweep '{}' -o '{}/a' --no-progress --set workload.arrivals.rate=abc", f, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(
      r.err,
      Contains("--set workload.arrivals.rate=abc: workload.arrivals.rate: expected a number"));
  CHECK_THAT(r.err, !Contains("s.yaml:1:1"));
  r = run_cli(fmt::format("sweep '{}' -o '{}/b' --no-progress --set engine.max_num_seqz=3", f, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--set engine.max_num_seqz=3: engine: unknown key 'max_num_seqz'"));

  f = write_set_errors_scenario(d, "-4", "32");  // a file error, with a --set beside it
  r = run_cli(fmt::format("sweep '{}' -o '{}/c' --no-progress --set seed=4", f, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("s.yaml:8:17: workload.max_requests: expected an integer >= 1"));

  f = write_set_errors_scenario(d, "4", "0");  // a bad value of the sweep's own list
  r = run_cli(fmt::format("sweep '{}' -o '{}/e' --no-progress", f, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("sweep point 1 (engine.kv.block_size=0): " + f +
                             ":16:32: engine.kv.block_size: expected an integer >= 1"));
  fs::remove_all(d);
}

TEST_CASE("capacity probes: errors name the --set, the --over or the file's line:col",
          "[cli][capacity][bad-input][set]") {
  const std::string d = make_temp_dir("capacity-set-errors");
  std::string f = write_set_errors_scenario(d, "4", "32");
  // capacity refuses a `sweep:` block: take it off with the scenario's own lines kept.
  {
    std::string text = kvsim::test::read_text(f);
    std::ofstream(f) << text.substr(0, text.find("sweep:"));
  }
  auto r = run_cli(fmt::format(
      "capacity '{}' --slo ttft_p99_s=10 -o '{}/a' --set workload.arrivals.rate=abc", f, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(
      r.err,
      Contains("--set workload.arrivals.rate=abc: workload.arrivals.rate: expected a number"));
  CHECK_THAT(r.err, !Contains("s.yaml:1:1"));
  r = run_cli(fmt::format(
      "capacity '{}' --slo ttft_p99_s=10 -o '{}/b' --over engine.kv.block_size=16,0", f, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(
      r.err,
      Contains("--over engine.kv.block_size=16,0: engine.kv.block_size: expected an integer >= 1"));
  {
    std::string text = kvsim::test::read_text(f);
    text.replace(text.find("max_requests: 4"), 15, "max_requests: -4");
    std::ofstream(f) << text;
  }
  r = run_cli(fmt::format(
      "capacity '{}' --slo ttft_p99_s=10 -o '{}/c' --set seed=4 --over engine.kv.block_size=16,32",
      f, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("s.yaml:8:17: workload.max_requests: expected an integer >= 1"));
  fs::remove_all(d);
}

TEST_CASE("capacity: errors in the cost: block name the file's line:col",
          "[cli][capacity][bad-input]") {
  // The cost block is read once per configuration, from that configuration's copy of the
  // scenario: before, every such error read "s.yaml:1:1". The bad price is on line 15, its value
  // at column 34; the unknown key on line 15, column 3.
  const std::string d = make_temp_dir("capacity-cost-errors");
  std::string f = write_set_errors_scenario(d, "4", "32");
  std::string text = kvsim::test::read_text(f);
  text = text.substr(0, text.find("sweep:")) + "cost:\n  gpu_hour_usd: {a100-sxm4-80gb: -1}\n";
  std::ofstream(f) << text;
  auto r = run_cli(fmt::format("capacity '{}' --slo ttft_p99_s=10 -o '{}/a'", f, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             Contains("s.yaml:15:34: cost.gpu_hour_usd.a100-sxm4-80gb: expected a number >= 0"));
  r = run_cli(fmt::format(
      "capacity '{}' --slo ttft_p99_s=10 -o '{}/b' --over engine.max_num_seqs=4,8", f, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             Contains("s.yaml:15:34: cost.gpu_hour_usd.a100-sxm4-80gb: expected a number >= 0"));
  text.replace(text.find("gpu_hour_usd:"), 13, "gpu_hour_usdx:");
  std::ofstream(f) << text;
  r = run_cli(fmt::format("capacity '{}' --slo ttft_p99_s=10 -o '{}/c'", f, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("s.yaml:15:3: cost: unknown key 'gpu_hour_usdx'"));
  fs::remove_all(d);
}

}  // namespace
}  // namespace kvsim::test
