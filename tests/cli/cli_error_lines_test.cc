// Command-line and input errors that escaped the one-line contract ("kvsim: error: ...", one line
// on stderr, exit 2): CLI11's own errors (a flag out of range printed its message and "Run with
// --help for more information." without the prefix), a --trace-request id past int64 (clamped to
// the largest without a word), and a NUL byte in a value (it ended the message where it stood).
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/cli/run_cli.h"

namespace kvsim::test {
namespace {

namespace fs = std::filesystem;

void check_one_line(const CliResult& r, const std::string& expected_err) {
  CHECK(r.exit_code == 2);
  CHECK(r.err == expected_err + "\n");
}

TEST_CASE("a parallel degree of 0 is one kvsim: error line", "[cli][bad-input]") {
  check_one_line(run_cli("kv --model llama-3-8b --dp 0"),
                 "kvsim: error: --dp: Value 0 not in range 1 to 1024");
  check_one_line(run_cli("kv --model llama-3-8b --tp 0"),
                 "kvsim: error: --tp: Value 0 not in range 1 to 1024");
  check_one_line(run_cli("kv --bogus"),
                 "kvsim: error: The following argument was not expected: --bogus");
  // --help still prints its text and succeeds.
  const CliResult help = run_cli("kv --help");
  CHECK(help.exit_code == 0);
  CHECK(help.err.empty());
}

TEST_CASE("a --trace-request id outside int64 is refused, not clamped", "[cli][bad-input]") {
  // 2^63 = 9223372036854775808: one past the largest int64, which CLI11 read as 2^63 - 1.
  check_one_line(run_cli("run --no-output --trace-request 9223372036854775808"),
                 "kvsim: error: --trace-request: expected a request id in [0, "
                 "9223372036854775807], got '9223372036854775808'");
  check_one_line(run_cli("run --no-output --trace-request -1"),
                 "kvsim: error: --trace-request: expected a request id in [0, "
                 "9223372036854775807], got '-1'");
  check_one_line(run_cli("run --no-output --trace-request 1e3"),
                 "kvsim: error: --trace-request: expected a request id in [0, "
                 "9223372036854775807], got '1e3'");
}

TEST_CASE("a NUL byte in a scenario value is printed escaped, the line whole", "[cli][bad-input]") {
  const std::string d = make_temp_dir("nul-value");
  // YAML's "\0" escape puts a NUL into the trace path; the message stopped at "not found: nu".
  std::ofstream(d + "/s.yaml") << "name: t\nmodel: seed-7b-mha\ngpu: a100-sxm4-80gb\n"
                                  "workload: {trace: {path: \"nu\\0l.csv\"}}\n"
                                  "policies: [{name: none, guards: []}]\n";
  const CliResult r = run_cli("run --no-output s.yaml", d);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("nu\\x00l.csv") != std::string::npos);
  CHECK(r.err.rfind("kvsim: error: s.yaml:4:", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  fs::remove_all(d);
}

}  // namespace
}  // namespace kvsim::test
