// A whole `kvsim-validate e2e` on the CPU backend: a handful of short requests for llama-tiny on
// cpu-host. Checks that the report is produced and every number in it is finite; accuracy
// targets live in bench/e2e_cpu.sh, not here. Needs the CPU forward pass (make_cpu_forward) and
// run_replay (the measured replay); the figure is drawn by the figure test below, on fixed data.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "validate/replay/e2e.h"
#include "validate/replay/e2e_plot.h"

using namespace kvsim::validate;
namespace fs = std::filesystem;

namespace {

const char* kTiny = R"(name: e2e-smoke
description: "six short requests for the e2e smoke test"
seed: 3
model: llama-tiny
gpu: cpu-host
engine: {kv: {type: paged, block_size: 16}, max_num_batched_tokens: 512, max_model_len: 512}
workload:
  arrivals: {type: poisson, rate: 50}
  max_requests: 6
  prompt_tokens: {type: uniform, min: 16, max: 64}
  output_tokens: {type: uniform, min: 2, max: 8}
policies: [{name: paged, guards: []}]
)";

void all_finite(const nlohmann::json& j, const std::string& where) {
  if (j.is_number()) {
    INFO(where);
    CHECK(std::isfinite(j.get<double>()));
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items()) all_finite(v, where + "." + k);
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) all_finite(j[i], where + "[" + std::to_string(i) + "]");
  }
}

}  // namespace

TEST_CASE("e2e: a tiny scenario end to end on the CPU backend", "[e2e]") {
  // Each case runs in its own process, in parallel with the others: a folder per process.
  const fs::path d = fs::temp_directory_path() / ("kvsim_e2e_smoke_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  std::ofstream(d / "tiny.yaml") << kTiny;
  E2eOptions o;
  o.scenario = d / "tiny.yaml";
  o.out_dir = d / "out";
  o.quiet = true;
  o.plot = false;
  const E2eComparison c = run_e2e(o);
  CHECK(fs::exists(d / "out/calibration/grid.yaml"));
  CHECK(fs::exists(d / "out/calibration/profile.yaml"));
  CHECK(fs::exists(d / "out/modeled/requests.csv"));
  CHECK(fs::exists(d / "out/measured/iterations.csv"));
  REQUIRE(fs::exists(d / "out/e2e.json"));
  std::ifstream in(d / "out/e2e.json");
  const auto j = nlohmann::json::parse(in);
  all_finite(j, "e2e");
  CHECK(j["iterations"][0]["iterations"].get<int>() > 0);
  REQUIRE(c.policies.size() == 1);
  CHECK(c.policies[0].matched == 6);
}
