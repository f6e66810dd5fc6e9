// `kvsim-validate vllm-run RUN --gpu NAME [--model CONFIG.json] [--profile P.yaml] -o OUT`: replays
// a measured vLLM run (measured_run.h) through kvsim's engine - the run's engine arguments, its
// requests' lengths, arrivals at queued_ts - min(queued_ts) - and compares the serving figures
// request by request and in aggregate. OUT gets `kvsim run`'s files (scenario.yaml and trace.csv
// that produced them), measured_requests.csv, e2e.json (each metric measured, simulated and the
// error in %), e2e.txt (the table) and e2e.png (the CDFs side by side and running/waiting
// requests over time; scripts/kvsim_plot/vllm_run.py).
#pragma once

#include <filesystem>
#include <string>

namespace kvsim::validate {

struct VllmRunOptions {
  std::filesystem::path run;      // a run folder (meta.json, requests.jsonl) or bench-serve JSON
  std::string gpu;                // catalog GPU the run was served on
  std::string model;              // catalog name or config.json ("" = from the run's model name)
  std::filesystem::path profile;  // latency profile ("" = the GPU's built-in one)
  // Whether the host's GPUs reach each other peer to peer (auto: the catalog GPU's `p2p`). A
  // run records no P2P state, yet it decides vLLM's all-reduce path (docs/latency.md).
  std::string p2p = "auto";
  std::filesystem::path out_dir;
  bool quiet = false;
  bool plot = true;
  // Fit the per-step host overhead (added to the profile's iteration_us) so that kvsim's mean
  // TPOT equals the run's; OUT/profile-fitted.yaml holds it and the comparison uses it.
  bool fit_step_overhead = false;
};

// Returns the largest |error| in % over the headline figures (TTFT mean/p50/p99, TPOT
// mean/p50/p99, E2E mean/p99). Throws InputError on bad input.
double run_vllm_run(const VllmRunOptions& o);

}  // namespace kvsim::validate
