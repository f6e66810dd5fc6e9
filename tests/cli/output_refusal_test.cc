// A refused command leaves its output folder as it was: the checks that can refuse it run before
// the first file is written. A sweep into the folder of another scenario's sweep used to be
// refused only after it had replaced that folder's sweep.json; an -o path too long for the table
// of open temporaries (core/atomic_file.h) used to be written without any signal handler able to
// remove its temporaries.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <string>

#include "tests/cli/run_cli.h"

namespace kvsim::test {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

// Every file under `dir` with its bytes.
std::map<std::string, std::string> folder_snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files[e.path().string()] = read_text(e.path().string());
  }
  return files;
}

size_t line_count(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST_CASE("a sweep refused for another scenario's folder writes nothing", "[cli][sweep]") {
  const std::string sweep =
      std::string(KVSIM_SOURCE_DIR) + "/scenarios/sweep-margin-blocksize.yaml";
  const std::string d = make_temp_dir("sweep-refused");
  REQUIRE(
      run_cli(fmt::format("sweep {} -o {} --set workload.trace.max_requests=100 -j 2", sweep, d))
          .exit_code == 0);
  const auto before = folder_snapshot(d);
  // The same points (the same names) of another scenario: 101 requests.
  const auto r =
      run_cli(fmt::format("sweep {} -o {} --set workload.trace.max_requests=101 -j 2", sweep, d));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("holds a finished run of a different scenario"));
  CHECK(line_count(r.err) == 1);
  CHECK(folder_snapshot(d) == before);  // sweep.json, summary.csv and every point as they were
  fs::remove_all(d);
}

TEST_CASE("an output path too long for kvsim is one line and exit 2, before anything is written",
          "[cli]") {
  const std::string serial = std::string(KVSIM_SOURCE_DIR) + "/tests/data/capacity/serial.yaml";
  const std::string d = make_temp_dir("long-out");
  std::string deep = d;
  while (deep.size() < 1100) deep += "/" + std::string(100, 'a');
  for (const std::string& args :
       {fmt::format("run {} -o {}", serial, deep), fmt::format("sweep {} -o {}", serial, deep),
        fmt::format("capacity {} --slo ttft_p99_s=1 -o {}", serial, deep),
        fmt::format("run {} -o {}/out --timeline {}/t.json", serial, d, deep)}) {
    const auto r = run_cli(args);
    INFO(args);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("path too long"));
    CHECK(line_count(r.err) == 1);
    CHECK(fs::is_empty(d));
  }
  fs::remove_all(d);
}

}  // namespace
}  // namespace kvsim::test
