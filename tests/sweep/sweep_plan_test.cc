#include "sim/sweep/sweep_plan.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "core/errors.h"
#include "tests/sweep/sweep_plan_base.h"

namespace kvsim {
namespace {

std::string at(const YAML::Node& tree, const std::string& a, const std::string& b) {
  return tree[a][b].Scalar();
}

TEST_CASE("a scenario without a sweep block is one point", "[sweep]") {
  const SweepPlan p = test::expand_over_base("");
  REQUIRE(p.keys.empty());
  REQUIRE(p.points.size() == 1);
  CHECK(p.points[0].name == "0-base");
}

TEST_CASE("grid: the cartesian product, first key slowest", "[sweep]") {
  const SweepPlan p = test::expand_over_base(
      "sweep:\n  grid:\n    engine.kv.block_size: [16, 32]\n    workload.rate: [1, 2, 3]\n");
  REQUIRE(p.keys == std::vector<std::string>{"engine.kv.block_size", "workload.rate"});
  REQUIRE(p.points.size() == 6);
  const std::vector<std::vector<std::string>> want = {{"16", "1"}, {"16", "2"}, {"16", "3"},
                                                      {"32", "1"}, {"32", "2"}, {"32", "3"}};
  for (size_t i = 0; i < 6; ++i) {
    INFO("point " << i);
    CHECK(p.points[i].index == i);
    CHECK(p.points[i].values == want[i]);
    CHECK(p.points[i].tree["engine"]["kv"]["block_size"].Scalar() == want[i][0]);
    CHECK(at(p.points[i].tree, "workload", "rate") == want[i][1]);
    CHECK_FALSE(p.points[i].tree["sweep"].IsDefined());  // each point is a plain scenario
  }
  CHECK(p.points[4].name == "4-block_size=32_rate=2");
}

TEST_CASE("zip: lists advance together; with a grid they are one more axis", "[sweep]") {
  const SweepPlan z = test::expand_over_base(
      "sweep:\n  zip:\n    engine.kv.block_size: [16, 32, 64]\n    workload.rate: [5, 6, 7]\n");
  REQUIRE(z.points.size() == 3);
  CHECK(z.points[2].values == std::vector<std::string>{"64", "7"});

  const SweepPlan g = test::expand_over_base(
      "sweep:\n  grid: {seed: [1, 2]}\n  zip: {engine.kv.block_size: [16, 32], workload.rate: [5, "
      "6]}\n");
  REQUIRE(g.keys == std::vector<std::string>{"seed", "engine.kv.block_size", "workload.rate"});
  REQUIRE(g.points.size() == 4);
  CHECK(g.points[1].values == std::vector<std::string>{"1", "32", "6"});
  CHECK(g.points[2].values == std::vector<std::string>{"2", "16", "5"});
}

TEST_CASE("key paths reach into lists by index and values may be maps", "[sweep]") {
  const SweepPlan p = test::expand_over_base(
      "sweep:\n  grid:\n    policies.1.guards.0.safety_margin_gb: [0, 2.5]\n"
      "    engine.kv: [{type: paged, block_size: 32}, {type: contiguous}]\n");
  REQUIRE(p.points.size() == 4);
  const YAML::Node t = p.points[1].tree;
  CHECK(t["policies"][1]["guards"][0]["safety_margin_gb"].Scalar() == "0");
  CHECK(t["policies"][1]["guards"][0]["type"].Scalar() == "kv_guard");  // siblings kept
  CHECK(t["engine"]["kv"]["type"].Scalar() == "contiguous");
  CHECK(p.points[1].values[1] == "{type: contiguous}");
  CHECK(p.points[3].tree["policies"][1]["guards"][0]["safety_margin_gb"].Scalar() == "2.5");
  CHECK(p.points[3].name == "3-safety_margin_gb=2.5_kv=_type__contiguous_");
}

TEST_CASE("bad sweep blocks and paths are clean errors with a position", "[sweep]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(
      test::expand_over_base("sweep:\n  grid:\n    policies.5.guards.0.safety_margin_gb: [1]\n"),
      Contains("s.yaml:13:43") && Contains("index 5 past the end of a list of 2"));
  CHECK_THROWS_WITH(test::expand_over_base("sweep:\n  grid:\n    policies.0.name.x: [1]\n"),
                    Contains("s.yaml:13:24") && Contains("inside a scalar"));
  CHECK_THROWS_WITH(test::expand_over_base("sweep:\n  grid:\n    workload.rate: []\n"),
                    Contains("s.yaml:13:20") && Contains("a non-empty list"));
  CHECK_THROWS_WITH(test::expand_over_base("sweep:\n  grid:\n    workload.rate: 3\n"),
                    Contains("a non-empty list"));
  CHECK_THROWS_WITH(test::expand_over_base("sweep:\n  grid:\n    engine..kv: [1]\n"),
                    Contains("is not a key path"));
  CHECK_THROWS_WITH(
      test::expand_over_base("sweep:\n  zip: {seed: [1, 2], workload.rate: [1, 2, 3]}\n"),
      Contains("zip lists must have one length"));
  CHECK_THROWS_WITH(test::expand_over_base("sweep:\n  gird: {seed: [1]}\n"),
                    Contains("did you mean 'grid'"));
  CHECK_THROWS_WITH(test::expand_over_base("sweep: {}\n"), Contains("expected `grid:` or `zip:`"));
  CHECK_THROWS_WITH(test::expand_over_base("sweep: [1]\n"), Contains("a map with `grid:`"));
  CHECK_THROWS_WITH(test::expand_over_base("sweep:\n  grid: {sweep.grid: [1]}\n"),
                    Contains("its own block"));
  CHECK_THROWS_AS(test::expand_over_base("sweep:\n  grid:\n    policies.9.name: [x]\n"),
                  ConfigError);
}

TEST_CASE("a sweep that would explode is refused", "[sweep]") {
  std::string big = "sweep:\n  grid:\n";
  std::string values = "[";
  for (int i = 0; i < 200; ++i) values += fmt::format("{}{}", i ? "," : "", i);
  values += "]";
  for (const char* k : {"seed", "workload.rate", "engine.kv.block_size"}) {
    big += fmt::format("    {}: {}\n", k, values);
  }
  CHECK_THROWS_WITH(test::expand_over_base(big),
                    Catch::Matchers::Contains("more than 1000000 points"));
}

}  // namespace
}  // namespace kvsim
