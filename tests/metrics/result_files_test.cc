// The result folder: trace counters in summary.json, per-request rows streamed to a temporary
// file that takes its final name only when the run succeeded.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/engine/engine_test_util.h"

using namespace kvsim;

namespace {

namespace fs = std::filesystem;

// Two policies over a trace of 7 rows of which 3 are bad (a non-integer, a zero output, a row
// that goes back in time).
std::string trace_scenario(const fs::path& trace, const char* on_bad_row) {
  return fmt::format(R"(
name: trace-counts
seed: 1
model: llama-3-8b
gpu: a100-sxm4-80gb
engine: {{kv: {{type: paged, block_size: 16}}}}
workload:
  trace: {{path: {}, on_bad_row: {}}}
policies: [{{name: a, guards: []}}, {{name: b, guards: []}}]
)",
                     trace.string(), on_bad_row);
}

RunResult result_files_run_to(const std::string& yaml, const fs::path& out) {
  const Scenario s = load_scenario(ConfigNode::parse_string(yaml, "test.yaml"), Catalog::builtin());
  RunOptions o;
  o.out_dir = out.string();
  o.check_invariants = true;
  return run_scenario(s, o);
}

}  // namespace

TEST_CASE("rows skipped under on_bad_row: skip are counted in summary.json", "[engine][trace]") {
  const fs::path d = test::fresh_dir("trace-counts");
  const fs::path trace = d / "t.csv";
  std::ofstream(trace) << "arrival_s,prompt_tokens,output_tokens\n"
                          "0.0,100,5\n"
                          "0.5,abc,5\n"
                          "1.0,100,0\n"
                          "2.0,200,3\n"
                          "1.5,100,5\n"
                          "3.0,50,2\n"
                          "4.0,10,1\n";
  const RunResult r = result_files_run_to(trace_scenario(trace, "skip"), d / "out");
  REQUIRE(r.trace.has_value());
  CHECK(r.trace->skipped_bad_rows == 3);
  CHECK(r.trace->requests == 4);
  for (const PolicySummary& p : r.policies) CHECK(p.requests_total == 4);
  const auto j = nlohmann::json::parse(test::file_text(d / "out" / "summary.json"));
  REQUIRE(j.contains("trace"));
  CHECK(j["trace"]["skipped_bad_rows"] == 3);
  CHECK(j["trace"]["requests"] == 4);
  CHECK(j["trace"]["rows_read"] == 7);
  fs::remove_all(d);
}

TEST_CASE("summary.json has no trace block for generated workloads", "[engine][trace]") {
  const fs::path d = test::fresh_dir("no-trace");
  const RunResult r = result_files_run_to(R"(
name: gen
seed: 3
model: llama-3-8b
gpu: a100-sxm4-80gb
workload:
  arrivals: {type: poisson, rate: 4}
  max_requests: 12
  prompt_tokens: {type: uniform, min: 16, max: 512}
  output_tokens: {type: uniform, min: 1, max: 40}
policies: [{name: p, guards: []}]
)",
                                          d / "out");
  CHECK_FALSE(r.trace.has_value());
  const auto j = nlohmann::json::parse(test::file_text(d / "out" / "summary.json"));
  CHECK_FALSE(j.contains("trace"));
  fs::remove_all(d);
}

TEST_CASE("streamed requests.csv holds every policy's rows, and nothing is left on failure",
          "[engine][trace]") {
  const fs::path d = test::fresh_dir("stream");
  const fs::path trace = d / "t.csv";
  std::ofstream(trace) << "arrival_s,prompt_tokens,output_tokens\n0.0,100,5\n0.5,abc,5\n1.0,30,2\n";
  result_files_run_to(trace_scenario(trace, "skip"), d / "out");
  const std::string rows = test::file_text(d / "out" / "requests.csv");
  CHECK(rows.rfind(Recorder::request_header(), 0) == 0);
  CHECK(std::count(rows.begin(), rows.end(), '\n') == 1 + 2 * 2);  // header + 2 policies x 2
  CHECK(rows.find("\na,0,") != std::string::npos);
  CHECK(rows.find("\nb,1,") != std::string::npos);
  for (const auto& e : fs::directory_iterator(d / "out")) {
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
  }
  // A bad row under on_bad_row: error fails the run mid-way: no result file appears, no
  // temporary file stays, and the folder this run would have created is gone.
  CHECK_THROWS(result_files_run_to(trace_scenario(trace, "error"), d / "failed"));
  CHECK_FALSE(fs::exists(d / "failed"));
  fs::remove_all(d);
}
