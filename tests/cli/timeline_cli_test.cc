// End-to-end: `kvsim run --timeline FILE.json [--timeline-window START:END]` (docs/timeline.md;
// the trace's content is tested in tests/timeline/timeline_test.cc).
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.h"

using Catch::Matchers::Contains;
using kvsim::test::make_temp_dir;
using kvsim::test::read_text;
using kvsim::test::run_cli;
namespace fs = std::filesystem;

TEST_CASE("kvsim run --timeline writes a trace of the window, beside or without the results",
          "[cli][timeline]") {
  const std::string dir = make_temp_dir("kvsim-timeline");
  const std::string scenario = std::string(KVSIM_SOURCE_DIR) + "/scenarios/mixed-chat-docs.yaml";
  // The default scenario's first 20 simulated seconds: every policy's track, slices inside it.
  auto r = run_cli("run '" + scenario + "' --no-output --timeline '" + dir +
                   "/t.json' --timeline-window 0:20");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("timeline: " + dir + "/t.json"));
  const auto trace = nlohmann::json::parse(read_text(dir + "/t.json"));
  std::set<int> pids;
  int slices = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") pids.insert(e["pid"].get<int>());
    if (e["ph"] != "X") continue;
    ++slices;
    CHECK(e["ts"].get<double>() < 20e6);
  }
  CHECK(pids == std::set<int>{1, 2, 3, 4, 5});  // the scenario's five policies
  CHECK(slices > 0);
  // No temporary file is left beside it.
  int files = 0;
  for ([[maybe_unused]] const auto& f : fs::directory_iterator(dir)) ++files;
  CHECK(files == 1);
}

TEST_CASE("kvsim run --timeline-window: a bad window is one line and exit 2", "[cli][timeline]") {
  const std::string dir = make_temp_dir("kvsim-timeline-bad");
  auto r = run_cli("run --no-output --timeline '" + dir + "/t.json' --timeline-window 9:3");
  CHECK(r.exit_code == 2);
  CHECK(r.err == "kvsim: error: --timeline-window '9:3': END must be after START\n");
  CHECK_FALSE(fs::exists(dir + "/t.json"));
  // The window needs --timeline.
  auto w = run_cli("run --no-output --timeline-window 0:3");
  CHECK(w.exit_code == 2);
  CHECK_THAT(w.err, Contains("--timeline"));
}
