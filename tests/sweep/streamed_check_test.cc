// A sweep runs its first point while its plan is still being checked: the check of every point
// (and sweep.json, written as it goes and renamed into place only at its end) runs on a thread of
// its own, and a worker starts a point as soon as the check has passed it. Before, a 10^6-point
// sweep ran nothing for minutes while every point was checked first. Also: a sweep's interrupt
// check abandons it, running points included, and run_sweep rethrows what the check threw.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "core/config_node.h"
#include "models/catalog.h"
#include "sim/sweep/sweep_runner.h"

namespace kvsim {
namespace {

namespace fs = std::filesystem;

// A 1000 x 1000 grid (10^6 points, the most a plan may have) of a two-request run: checking
// every point takes minutes, running the first one milliseconds.
const char* kMillionPoints = R"(name: million
seed: 1
model: seed-7b-mha
gpu: a100-sxm4-80gb
workload:
  arrivals: {type: fixed, rate: 1}
  max_requests: 2
  prompt_tokens: 64
  output_tokens: 2
policies: [{name: none, guards: []}]
)";

std::string million_point_scenario() {
  std::string text = kMillionPoints;
  text += "sweep:\n  grid:\n    workload.prompt_tokens: [";
  for (int i = 1; i <= 1000; ++i) text += fmt::format("{}{}", i > 1 ? ", " : "", 63 + i);
  text += "]\n    workload.output_tokens: [";
  for (int i = 1; i <= 1000; ++i) text += fmt::format("{}{}", i > 1 ? ", " : "", 1 + i);
  return text + "]\n";
}

fs::path streamed_dir(const std::string& stem) {
  const fs::path d = fs::temp_directory_path() / fmt::format("kvsim-{}-{}", stem, ::getpid());
  fs::remove_all(d);
  return d;
}

TEST_CASE("a streamed sweep plan runs its first point before the whole plan is checked",
          "[sweep]") {
  const SweepPlan plan =
      expand_sweep(ConfigNode::parse_string(million_point_scenario(), "million.yaml"));
  REQUIRE(plan.points.size() == 1'000'000);
  const fs::path dir = streamed_dir("streamed-check");
  SweepOptions o{.out_dir = dir, .jobs = 1};
  // Called as the first point's replica is built, i.e. when the point starts running: whether
  // the check had finished (sweep.json is renamed into place once every point passed).
  std::atomic<int> starts{0};
  bool index_written_at_start = true;
  o.run.make_clock = [&](const ReplicaContext&) -> std::unique_ptr<IterationClock> {
    if (starts++ == 0) index_written_at_start = fs::exists(dir / "sweep.json");
    throw std::runtime_error("first point ran");  // stops the sweep: nothing more to learn
  };
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(run_sweep(plan, Catalog::builtin(), o),
                    Catch::Contains("sweep point 0 (") && Catch::Contains("first point ran"));
  CHECK(starts == 1);
  CHECK_FALSE(index_written_at_start);
  CHECK_FALSE(fs::exists(dir / "sweep.json"));  // the check stopped with the sweep, unfinished
  // Stopping took as long as the first point, not the check of 10^6 (minutes).
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(60));
  fs::remove_all(dir);
}

struct Stop {};

TEST_CASE("a sweep's interrupt check abandons it, running points write nothing", "[sweep]") {
  std::string text = kMillionPoints;
  // Two points of fifty million requests: minutes each.
  text.replace(text.find("max_requests: 2"), 15, "max_requests: 50000000");
  text += "sweep:\n  grid:\n    seed: [1, 2]\n";
  const SweepPlan plan = expand_sweep(ConfigNode::parse_string(text, "long.yaml"));
  const fs::path dir = streamed_dir("interrupt-check");
  for (const int jobs : {1, 2}) {
    SweepOptions o{.out_dir = dir / std::to_string(jobs), .jobs = jobs};
    const auto started = std::chrono::steady_clock::now();
    o.interrupt_check = [&] {
      if (std::chrono::steady_clock::now() - started > std::chrono::milliseconds(500)) throw Stop{};
    };
    CHECK_THROWS_AS(run_sweep(plan, Catalog::builtin(), o), Stop);
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
    // The points cut short left no file (their folders, made by their files, are gone too).
    CHECK(fs::is_empty(o.out_dir / "points"));
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvsim
