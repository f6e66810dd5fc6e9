// Golden results: each shipped scenario (scenarios/*.yaml, and tests/data/golden-scenarios/*.yaml)
// is run as a user runs it
// (`kvsim run FILE -o DIR`; a scenario with a `sweep:` section is also swept) and compared with
// tests/golden/<scenario>/:
//   summary.json  the run's summary; counts and strings must match exactly, floating-point
//                 figures to a relative 1e-9 (so a refactor that reorders a sum still passes,
//                 a behaviour change does not)
//   digests.json  rows and FNV-1a 64 of requests.csv and timeseries.csv (and of the sweep's
//                 summary.csv): byte-identical or the test fails
// KVSIM_UPDATE_GOLDEN=1 rewrites the files instead of comparing; a commit that changes a golden
// file says why. A scenario without a golden folder, or a golden folder without a scenario, fails.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/fnv1a.h"
#include "tests/cli/run_cli.h"
#include "tests/sanitizer.h"

using kvsim::test::make_temp_dir;
using kvsim::test::read_text;
using kvsim::test::run_cli;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kGoldenDir = fs::path(KVSIM_SOURCE_DIR) / "tests" / "golden";
// The shipped scenarios, plus scenarios kept only for golden coverage of engine paths that no
// shipped scenario takes (preemption by swap, static batches, chunked prefill, every guard, ...).
const fs::path kScenarioDirs[] = {fs::path(KVSIM_SOURCE_DIR) / "scenarios",
                                  fs::path(KVSIM_TEST_DATA) / "golden-scenarios"};

bool updating() {
  const char* v = std::getenv("KVSIM_UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

json digest(const fs::path& file) {
  const std::string text = read_text(file.string());
  int64_t rows = 0;
  for (char c : text) rows += c == '\n';
  return {{"lines", rows},
          {"bytes", static_cast<int64_t>(text.size())},
          {"fnv1a64", fmt::format("{:016x}", kvsim::fnv1a64(text))}};
}

// Every difference between `want` and `got`, one line each, with its JSON path.
void compare(const json& want, const json& got, const std::string& path,
             std::vector<std::string>& diffs) {
  if (want.is_number_float() || got.is_number_float()) {
    if (!want.is_number() || !got.is_number()) {
      diffs.push_back(path + ": expected " + want.dump() + ", got " + got.dump());
      return;
    }
    const double a = want.get<double>(), b = got.get<double>();
    const double tol = 1e-9 * std::max(std::fabs(a), std::fabs(b));
    if (!(std::fabs(a - b) <= tol)) {
      diffs.push_back(fmt::format("{}: expected {:.17g}, got {:.17g}", path, a, b));
    }
    return;
  }
  // Signed and unsigned integers are one kind here (a parsed file holds non-negative counts as
  // unsigned); nlohmann's == compares them by value.
  const bool both_integers = want.is_number_integer() && got.is_number_integer();
  if (want.type() != got.type() && !both_integers) {
    diffs.push_back(path + ": expected " + want.dump() + ", got " + got.dump());
    return;
  }
  if (want.is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, v] : want.items()) keys.insert(k);
    for (const auto& [k, v] : got.items()) keys.insert(k);
    for (const auto& k : keys) {
      if (!want.contains(k))
        diffs.push_back(path + "." + k + ": not in the golden result");
      else if (!got.contains(k))
        diffs.push_back(path + "." + k + ": missing");
      else
        compare(want[k], got[k], path + "." + k, diffs);
    }
  } else if (want.is_array()) {
    if (want.size() != got.size()) {
      diffs.push_back(
          fmt::format("{}: expected {} elements, got {}", path, want.size(), got.size()));
      return;
    }
    for (size_t i = 0; i < want.size(); ++i) {
      compare(want[i], got[i], fmt::format("{}[{}]", path, i), diffs);
    }
  } else if (want != got) {
    diffs.push_back(path + ": expected " + want.dump() + ", got " + got.dump());
  }
}

void write_json(const fs::path& file, const json& j) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << j.dump(2) << "\n";
}

void check_against_golden(const std::string& name, const json& summary, const json& digests) {
  const fs::path dir = kGoldenDir / name;
  if (updating()) {
    write_json(dir / "summary.json", summary);
    write_json(dir / "digests.json", digests);
    WARN("rewrote " << dir.string());
    return;
  }
  REQUIRE(fs::exists(dir / "summary.json"));
  REQUIRE(fs::exists(dir / "digests.json"));
  std::vector<std::string> diffs;
  compare(json::parse(read_text((dir / "summary.json").string())), summary, "summary", diffs);
  compare(json::parse(read_text((dir / "digests.json").string())), digests, "digests", diffs);
  std::string report;
  for (size_t i = 0; i < diffs.size() && i < 20; ++i) report += "\n  " + diffs[i];
  INFO(name << ": " << diffs.size() << " difference(s) from tests/golden/" << name << report);
  CHECK(diffs.empty());
}

std::vector<fs::path> shipped_scenarios() {
  std::vector<fs::path> out;
  for (const auto& dir : kScenarioDirs) {
    std::vector<fs::path> here;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".yaml") here.push_back(e.path());
    }
    std::sort(here.begin(), here.end());
    out.insert(out.end(), here.begin(), here.end());
  }
  return out;
}

}  // namespace

namespace {

// Runs every shipped scenario (and its sweep, if it has one) with `flags` and compares the
// results with its golden.
void check_every_golden(const std::string& flags) {
  const auto scenarios = shipped_scenarios();
  REQUIRE(!scenarios.empty());
  for (const auto& file : scenarios) {
    const std::string name = file.stem().string();
    DYNAMIC_SECTION(name) {
      const std::string tmp = make_temp_dir("kvsim-golden");
      const auto r = run_cli("run " + flags + "'" + file.string() + "' -o '" + tmp + "/run'");
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      CHECK(r.err == "");  // a shipped scenario runs without a warning
      const json summary = json::parse(read_text(tmp + "/run/summary.json"));
      json digests = {{"requests.csv", digest(tmp + "/run/requests.csv")},
                      {"timeseries.csv", digest(tmp + "/run/timeseries.csv")}};
      if (read_text(file.string()).find("\nsweep:") != std::string::npos) {
        const auto s = run_cli("sweep " + flags + "'" + file.string() + "' -o '" + tmp + "/sweep'");
        INFO(s.err);
        REQUIRE(s.exit_code == 0);
        digests["sweep/summary.csv"] = digest(tmp + "/sweep/summary.csv");
      }
      check_against_golden(name, summary, digests);
      fs::remove_all(tmp);
    }
  }
}

}  // namespace

TEST_CASE("every shipped scenario reproduces its golden result", "[golden]") {
  check_every_golden("");
}

// Checking mode asserts every invariant after each step (the pool's categories sum to capacity,
// no block leaked or freed twice, every request ends in one outcome) and turns the fast-forward
// off, so the same goldens also prove that stepping and the fast-forward agree.
// Under ASan the plain goldens above run every scenario's code; this repeat (about 130 s of the
// sanitizer stage) adds the invariant checks and stepping, which the Release stage runs in full.
TEST_CASE("every shipped scenario reproduces its golden result in checking mode", "[golden]") {
  KVSIM_SKIP_UNDER_SANITIZER(
      "the plain goldens run every scenario under ASan; the Release stage runs this repeat in "
      "checking mode");
  check_every_golden("--check-invariants ");
}

TEST_CASE("every golden folder belongs to a shipped scenario", "[golden]") {
  std::set<std::string> names;
  for (const auto& file : shipped_scenarios()) names.insert(file.stem().string());
  for (const auto& e : fs::directory_iterator(kGoldenDir)) {
    if (!e.is_directory()) continue;
    INFO("tests/golden/" << e.path().filename().string() << " has no scenarios/*.yaml");
    CHECK(names.count(e.path().filename().string()) == 1);
  }
}

TEST_CASE("the golden comparison tells counts, floats and strings apart", "[golden]") {
  std::vector<std::string> diffs;
  compare(json{{"n", 3}, {"x", 1.0}, {"s", "a"}}, json{{"n", 3}, {"x", 1.0 + 1e-12}, {"s", "a"}},
          "", diffs);
  CHECK(diffs.empty());  // 1e-12 relative is inside 1e-9
  compare(json{{"n", 3}}, json{{"n", 4}}, "", diffs);
  compare(json{{"x", 1.0}}, json{{"x", 1.0 + 1e-6}}, "", diffs);
  compare(json{{"s", "a"}}, json{{"s", "b"}}, "", diffs);
  compare(json{{"a", 1}}, json{{"b", 1}}, "", diffs);
  CHECK(diffs.size() == 5);  // the count, the float, the string, and a key missing + one extra
}
