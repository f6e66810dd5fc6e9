// `kvsim-validate e2e SCENARIO --backend cpu|cuda -o DIR`: kvsim's end-to-end error on this
// machine (docs/fidelity.md "kvsim-validate e2e"). Four steps:
//   1. calibrate: a grid of the scenario model's own kernels (e2e_grid.h) measured on the backend
//      relative to the scenario's GPU entry (on the CPU with placeholder peaks raised to what
//      the kernels reach, DIR/scenario.yaml: e2e_device.h), fitted into
//      DIR/calibration/profile.yaml; then the
//      per-iteration overhead the kernel fit cannot see, from a few whole iterations run by the
//      forward pass (e2e_overhead.h);
//   2. modeled: `kvsim run` of the scenario with every policy's engine.profile = that profile
//      -> DIR/modeled/;
//   3. measured: `kvsim-validate replay` of the scenario with the same profile -> DIR/measured/;
//   4. compare (e2e_compare.h) -> DIR/e2e.json, e2e_iterations.csv, e2e_requests.csv, a table on
//      stdout, and the figure DIR/e2e.png (scripts/kvsim_plot/e2e.py).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "validate/replay/e2e_compare.h"
#include "validate/replay/forward_pass.h"

namespace kvsim::validate {

struct E2eOptions {
  std::filesystem::path scenario;
  std::string backend = "cpu";  // cpu | cuda
  std::filesystem::path out_dir;
  int repeats = 1;    // timed executions per replayed iteration (their median)
  int threads = 1;    // CPU threads of the forward pass
  uint64_t seed = 1;  // weights, inputs and KV values of the forward pass
  bool quiet = false;
  bool plot = true;  // render DIR/e2e.png (needs python3 + matplotlib)
  // Tests only: a clock maker used instead of the backend's forward pass, for both the overhead
  // probe and the replay (ReplayOptions::clock_override).
  std::function<std::unique_ptr<IterationClock>(const ForwardSetup&)> clock_override;
};

// Runs the four steps; throws InputError for bad input. Returns the comparison it wrote.
E2eComparison run_e2e(const E2eOptions& o);

}  // namespace kvsim::validate
