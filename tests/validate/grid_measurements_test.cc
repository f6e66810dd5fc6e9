#include <catch2/catch.hpp>

#include <map>

#include "core/errors.h"
#include "tests/validate/shell.h"
#include "validate/grid.h"
#include "validate/measurements.h"

using namespace kvsim;
using namespace kvsim::validate;

TEST_CASE("the shipped grids parse and expand", "[validate][grid]") {
  for (const char* name : {"cpu-tiny", "quick", "full"}) {
    INFO(name);
    const Grid cpu =
        load_grid(std::string(KVSIM_SOURCE_DIR) + "/validate/grids/" + name + ".yaml", "cpu");
    const Grid gpu =
        load_grid(std::string(KVSIM_SOURCE_DIR) + "/validate/grids/" + name + ".yaml", "cuda");
    CHECK(cpu.name == name);
    CHECK_FALSE(gpu.cases.empty());
    std::map<std::string, int> splits;
    for (const KernelCase& c : gpu.cases) ++splits[c.split];
    CHECK(splits["train"] > 0);
    CHECK(splits["test"] > 0);
    for (const KernelCase& c : cpu.cases) CHECK(c.version == 0);  // the CPU has one implementation
  }
}

TEST_CASE("grid splits: only the top version of a modelled class is fitted", "[validate][grid]") {
  const Grid g = parse_grid(R"(
name: t
holdout_every: 2
kernels:
  - {class: flash, versions: [1, 2], heads: 2, seq: [64, 128], head_dim: 64, causal: [true, false]}
  - {class: membw_read, bytes_mib: [1]}
)",
                            "t.yaml", "cuda");
  REQUIRE(g.cases.size() == 9);
  std::map<std::string, int> n;
  for (const KernelCase& c : g.cases) {
    if (c.version == 1 || !c.attn.causal || c.kind == KernelClass::kMembwRead) {
      CHECK(c.split == "none");
    }
    ++n[c.split];
  }
  CHECK(n["train"] == 1);
  CHECK(n["test"] == 1);
}

TEST_CASE("grid errors name the file, line and column", "[validate][grid]") {
  REQUIRE_THROWS_WITH(
      parse_grid("name: t\nkernels:\n  - {class: flash, heads: 2, seq: [8], typo: 1}\n", "g.yaml",
                 "cpu"),
      Catch::Matchers::Contains("g.yaml:3") && Catch::Matchers::Contains("typo"));
  REQUIRE_THROWS_WITH(
      parse_grid("name: t\nkernels:\n  - {class: flsh, heads: 2, seq: [8]}\n", "g.yaml", "cpu"),
      Catch::Matchers::Contains("g.yaml:3"));
  REQUIRE_THROWS_WITH(
      parse_grid("name: t\nkernels:\n  - {class: flash, heads: 6, kv_heads: 4, seq: [8]}\n",
                 "g.yaml", "cpu"),
      Catch::Matchers::Contains("g.yaml:3") && Catch::Matchers::Contains("must divide"));
  REQUIRE_THROWS_AS(
      parse_grid("name: t\nkernels:\n  - {class: gemm, m: [1], n: [0], k: 4}\n", "g.yaml", "cpu"),
      ConfigError);
}

TEST_CASE("measurements.csv round-trips and rejects bad rows with file:line", "[validate][csv]") {
  const Grid g = parse_grid(R"(
name: t
kernels:
  - {class: paged_decode, heads: 4, kv_heads: 2, head_dim: 64, context: [100], block_size: [16]}
  - {class: gemm, m: [3], n: [8], k: [16]}
  - {class: membw_copy, bytes_mib: [1]}
)",
                            "t.yaml", "cpu");
  std::vector<Measurement> rows;
  for (const KernelCase& c : g.cases) {
    Measurement m;
    m.c = c;
    m.reps = 3;
    m.seconds = 1.5e-5;
    m.seconds_min = m.seconds_p10 = 1.2e-5;
    m.seconds_p90 = 2e-5;
    m.check = "pass";
    rows.push_back(m);
  }
  rows.back().skipped = "needs 3 bytes, \"none\" free";
  const auto dir = test::fresh_dir("kvsim-csv");
  std::ofstream(dir / "m.csv") << measurements_csv(rows);
  const std::vector<Measurement> back = read_measurements(dir / "m.csv");
  REQUIRE(back.size() == rows.size());
  CHECK(measurements_csv(back) == measurements_csv(rows));
  CHECK(back[0].c.paged.block_size == 16);
  CHECK(back[2].skipped == rows[2].skipped);
  std::string text = measurements_csv(rows);
  text.replace(text.find("1.5e-05"), 7, "fast");
  std::ofstream(dir / "bad.csv") << text;
  REQUIRE_THROWS_WITH(
      read_measurements(dir / "bad.csv"),
      Catch::Matchers::Contains("bad.csv:2") && Catch::Matchers::Contains("column seconds"));
  std::filesystem::remove_all(dir);
}
