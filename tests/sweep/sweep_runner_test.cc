#include "sim/sweep/sweep_runner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/errors.h"
#include "models/catalog.h"

namespace kvsim {
namespace {

namespace fs = std::filesystem;

// Eight small points: two policies each, a few dozen synthetic requests.
const char* kScenario = R"(name: tiny-sweep
seed: 3
model: llama-3-8b
gpu: a100-sxm4-80gb
engine: {kv: {type: paged, block_size: 16}, max_num_seqs: 32}
workload:
  arrivals: {type: poisson, rate: 20}
  max_requests: 40
  prompt_tokens: {type: uniform, min: 256, max: 2048}
  output_tokens: {type: uniform, min: 16, max: 128}
policies:
  - name: none
    guards: []
  - name: guard
    guards: [{type: kv_guard, num_layers: 32, num_heads: 8, safety_margin_gb: 10}]
sweep:
  grid:
    engine.kv.block_size: [16, 64]
    policies.1.guards.0.safety_margin_gb: [0, 50]
  zip: {seed: [3, 4]}
)";

fs::path fresh_dir(const std::string& stem) {
  static int counter = 0;
  const fs::path d =
      fs::temp_directory_path() / fmt::format("kvsim-{}-{}-{}", stem, ::getpid(), counter++);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

SweepPlan plan() {
  const fs::path dir = fresh_dir("plan");
  std::ofstream(dir / "s.yaml") << kScenario;
  return expand_sweep(ConfigNode::parse_file(dir / "s.yaml"));
}

std::string run(const SweepPlan& p, int jobs, int shard = 0, int shards = 1, fs::path dir = {}) {
  if (dir.empty()) dir = fresh_dir("sweep");
  SweepOptions o{.out_dir = dir, .jobs = jobs, .shard_index = shard, .shard_count = shards};
  run_sweep(p, Catalog::builtin(), o);
  return shards == 1 ? slurp(dir / "summary.csv") : std::string();
}

TEST_CASE("sweep summary: a row per point and policy, a column per key", "[sweep]") {
  const SweepPlan p = plan();
  REQUIRE(p.points.size() == 8);
  const std::string csv = run(p, 1);
  std::istringstream lines(csv);
  std::string header, row;
  std::getline(lines, header);
  CHECK(header.rfind("point,engine.kv.block_size,policies.1.guards.0.safety_margin_gb,seed,policy,"
                     "requests_total,",
                     0) == 0);
  std::getline(lines, row);
  CHECK(row.rfind("0,16,0,3,none,40,", 0) == 0);
  std::getline(lines, row);
  CHECK(row.rfind("0,16,0,3,guard,40,", 0) == 0);
  int n = 2;
  while (std::getline(lines, row)) ++n;
  CHECK(n == 16);
}

TEST_CASE("jobs 1 and jobs 3 write identical bytes", "[sweep]") {
  const SweepPlan p = plan();
  const fs::path a = fresh_dir("j1"), b = fresh_dir("j3");
  const std::string one = run(p, 1, 0, 1, a);
  const std::string three = run(p, 3, 0, 1, b);
  CHECK(one == three);
  for (const SweepPoint& pt : p.points) {
    INFO(pt.name);
    CHECK(slurp(a / "points" / pt.name / "summary.json") ==
          slurp(b / "points" / pt.name / "summary.json"));
    CHECK(slurp(a / "points" / pt.name / "requests.csv") ==
          slurp(b / "points" / pt.name / "requests.csv"));
  }
}

TEST_CASE("shards in separate or shared folders merge into the single-run summary", "[sweep]") {
  const SweepPlan p = plan();
  const std::string whole = run(p, 2);
  const fs::path s0 = fresh_dir("s0"), s1 = fresh_dir("s1"), s2 = fresh_dir("s2");
  run(p, 1, 0, 3, s0);
  run(p, 2, 1, 3, s1);
  CHECK_FALSE(fs::exists(s0 / "summary.csv"));
  CHECK_THROWS_WITH(sweep_summary_csv({s0, s1}), Catch::Matchers::Contains("has no finished run"));
  run(p, 1, 2, 3, s2);
  CHECK(sweep_summary_csv({s0, s1, s2}) == whole);
  CHECK(sweep_summary_csv({s2, s0, s1}) == whole);
  const fs::path shared = fresh_dir("shared");
  for (int i = 0; i < 3; ++i) run(p, 1, i, 3, shared);
  CHECK(sweep_summary_csv({shared}) == whole);
}

TEST_CASE("resume: finished points are skipped, missing ones run, the summary is the same",
          "[sweep]") {
  const SweepPlan p = plan();
  const fs::path dir = fresh_dir("resume");
  const std::string first = run(p, 2, 0, 1, dir);
  // Simulate a crash: one point never finished, another left without its manifest.
  fs::remove_all(dir / "points" / p.points[3].name);
  fs::remove(dir / "points" / p.points[6].name / "manifest.json");
  fs::remove(dir / "summary.csv");
  SweepOptions o{.out_dir = dir, .jobs = 2};
  const SweepReport r = run_sweep(p, Catalog::builtin(), o);
  CHECK(r.points_run == 2);
  CHECK(r.points_skipped == 6);
  CHECK(slurp(dir / "summary.csv") == first);
}

TEST_CASE("a folder from another sweep is refused, not mixed in", "[sweep]") {
  const SweepPlan p = plan();
  const fs::path dir = fresh_dir("other");
  run(p, 2, 0, 1, dir);
  SweepPlan changed = p;
  changed.points[0].tree["workload"]["max_requests"] = 41;
  SweepOptions o{.out_dir = dir, .jobs = 1};
  CHECK_THROWS_WITH(run_sweep(changed, Catalog::builtin(), o),
                    Catch::Matchers::Contains("different scenario"));
}

TEST_CASE("a failing point names itself and stops the sweep", "[sweep]") {
  SweepPlan p = plan();
  p.points[5].tree["engine"]["kv"]["block_sise"] = 3;
  SweepOptions o{.out_dir = fresh_dir("fail"), .jobs = 2};
  CHECK_THROWS_WITH(run_sweep(p, Catalog::builtin(), o),
                    Catch::Matchers::Contains("sweep point 5 (engine.kv.block_size=64") &&
                        Catch::Matchers::Contains("block_sise"));
}

TEST_CASE("shard specs i/n parse and bad ones are errors", "[sweep]") {
  int i = -1, n = -1;
  parse_shard("2/5", i, n);
  CHECK((i == 2 && n == 5));
  for (const char* bad : {"5/5", "-1/2", "1/0", "1", "1/2x", "a/b", ""}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_shard(bad, i, n), InputError);
  }
}

}  // namespace
}  // namespace kvsim
