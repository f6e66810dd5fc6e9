// `kvsim-validate replay`: a scenario through kvsim's own engine with each iteration's time
// measured by a real forward pass (validate/replay/forward_pass.h) instead of the latency model.
// PLACEHOLDER (branch h21e2e): the declaration agreed with h21replay, so `e2e` compiles and links
// before their implementation lands; the lead takes h21replay's replay.{h,cc} at merge.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "sim/serving/iteration_clock.h"
#include "validate/replay/forward_pass.h"

namespace kvsim::validate {

struct ReplayOptions {
  std::filesystem::path scenario;
  std::string backend = "cpu";         // cpu | cuda (make_cpu_forward / make_cuda_forward)
  std::filesystem::path out_dir;
  std::filesystem::path profile;       // "" = the scenario's; else every policy's engine.profile
  int repeats = 1;                     // ForwardSetup::repeats
  int threads = 1;
  uint64_t seed = 1;
  bool quiet = false;
  // Tests only: a clock maker used instead of the backend (e.g. one returning the modeled time).
  std::function<std::unique_ptr<IterationClock>(const ForwardSetup&)> clock_override;
};

// Runs the scenario through kvsim's engine with each iteration's time measured by the backend's
// forward pass. Writes the usual result files to out_dir (summary.json/.csv, requests.csv,
// timeseries.csv, manifest.json; the manifest and summary.json say "clock": "measured" and the
// backend/device) plus iterations.csv. Throws InputError for bad input.
void run_replay(const ReplayOptions& o);

}  // namespace kvsim::validate
