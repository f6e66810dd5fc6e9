#include "validate/replay/e2e.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/config_node.h"
#include "core/data_path.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "models/latency/profile.h"
#include "sim/config/scenario.h"
#include "sim/run/scenario_runner.h"
#include "validate/commands.h"
#include "validate/replay/e2e_device.h"
#include "validate/replay/e2e_grid.h"
#include "validate/replay/e2e_overhead.h"
#include "validate/replay/e2e_plot.h"
#include "validate/replay/replay.h"

namespace kvsim::validate {

namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The user's scenario, set up as `kvsim check` sets it up before anything is written: what only
// the set-up checks (a KV pool with no room) is named in the user's file, not in OUT/scenario.yaml,
// the copy on the calibrated device that steps 2 and 3 run.
Scenario load_checked_scenario(const ConfigNode& raw) {
  Scenario s = load_scenario(raw, Catalog::builtin());
  (void)prepare_scenario(s, RunOptions{});
  return s;
}

}  // namespace

E2eComparison run_e2e(const E2eOptions& o) {
  check_forward_backend(o.backend);
  const ConfigNode raw = ConfigNode::parse_file(o.scenario);
  const Scenario s = load_checked_scenario(raw);
  const fs::path out = o.out_dir;
  const fs::path cal = out / "calibration";
  const fs::path profile_path = fs::absolute(cal / "profile.yaml");
  auto say = [&](const std::string& line) {
    if (o.quiet) return;
    fmt::print("e2e: {}\n", line);
    std::fflush(stdout);
  };

  // 1. Calibrate: the model's own kernels, fitted relative to the scenario's GPU entry.
  say(fmt::format("1/4 calibrating {} kernels on the {} backend (peaks of {}) -> {}", s.model.name,
                  o.backend, s.gpu.name, cal.string()));
  write_file_atomic(cal / "grid.yaml", e2e_grid_yaml(s, o.backend));
  MeasureOptions mo;
  mo.grid = cal / "grid.yaml";
  mo.backend = o.backend;
  mo.out_dir = cal;
  mo.gpu = s.gpu.name;
  mo.quiet = true;
  if (const int failed = run_measure(mo); failed > 0) {
    throw InputError(
        fmt::format("{}: {} kernel correctness check(s) failed; the timings would not "
                    "describe working kernels",
                    (cal / "measurements.csv").string(), failed));
  }
  // On the CPU the catalog's peaks are placeholders: raise them where the kernels beat them
  // (e2e_device.h), and calibrate and run on that device.
  GpuSpec gpu = s.gpu;
  fs::path scenario_path = o.scenario;
  if (o.backend == "cpu") {
    const auto [best_flops, best_bytes] = best_rates(read_measurements(cal / "measurements.csv"));
    const DevicePeaks d = raise_peaks(s.gpu, best_flops, best_bytes);
    if (d.raised) {
      gpu = d.gpu;
      auto man = nlohmann::ordered_json::parse(read_text(cal / "manifest.json"));
      man["gpu_spec"]["from"] = "e2e";
      man["gpu_spec"]["fp16_flops"] = gpu.fp16_flops;
      man["gpu_spec"]["hbm_bytes_per_s"] = gpu.hbm_bytes_per_s;
      man["gpu_spec"]["source"] = gpu.source;
      write_file_atomic(cal / "manifest.json", man.dump(2) + "\n");
      scenario_path = out / "scenario.yaml";
      write_file_atomic(scenario_path, scenario_on_device(raw, gpu));
      say(
          fmt::format("{} peaks raised to {:.4g} FLOP/s and {:.4g} B/s (1.25x the best measured; "
                      "the catalog's are placeholders) -> {}",
                      s.gpu.name, gpu.fp16_flops, gpu.hbm_bytes_per_s, scenario_path.string()));
    }
  }
  run_calibrate({cal, profile_path, true});

  // The per-iteration overhead from a few whole iterations (e2e_overhead.h).
  Profile profile = load_profile(profile_path);
  const E2eShapes shapes = e2e_shapes(s);
  const LatencyModel lm(s.model, gpu, profile,
                        shapes.native_attention ? AttentionKind::kNative : AttentionKind::kFlash);
  ForwardSetup setup;
  setup.model = s.model;
  setup.block_tokens = shapes.block_tokens;
  setup.num_blocks = 64;  // the probes hold at most 4 x 64 tokens
  setup.seed = o.seed;
  setup.repeats = std::max(3, o.repeats);
  setup.threads = o.threads;
  OverheadFit overhead;
  {
    auto clock = o.clock_override ? o.clock_override(setup) : make_forward(o.backend, setup);
    overhead = fit_iteration_overhead(*clock, lm, shapes.block_tokens);
  }
  profile.iteration_overhead_s = overhead.iteration_overhead_s;
  profile.overheads_source = fmt::format(
      "kvsim-validate e2e: iteration overhead = median of (measured - modeled kernel time) over "
      "{} small whole iterations of the {} forward pass (validate/replay/e2e_overhead.h)",
      overhead.probes.size(), o.backend);
  write_file_atomic(profile_path, write_profile_yaml(profile));
  say(fmt::format("profile {} (iteration overhead {:.1f} us)", profile_path.string(),
                  overhead.iteration_overhead_s * 1e6));

  // 2. Modeled: `kvsim run` with that profile.
  say(fmt::format("2/4 modeled run -> {}", (out / "modeled").string()));
  const ConfigNode as_run = ConfigNode::parse_file(scenario_path);
  const Scenario modeled =
      load_scenario_with_sets(as_run, profile_sets(as_run, profile_path), Catalog::builtin());
  RunOptions ro;
  ro.out_dir = (out / "modeled").string();
  run_scenario(modeled, ro);

  // 3. Measured: the same engine with the forward pass as its clock.
  say(fmt::format("3/4 measured replay on the {} backend -> {}", o.backend,
                  (out / "measured").string()));
  ReplayOptions rp;
  rp.scenario = scenario_path;
  rp.backend = o.backend;
  rp.out_dir = out / "measured";
  rp.profile = profile_path;
  rp.repeats = o.repeats;
  rp.threads = o.threads;
  rp.seed = o.seed;
  rp.quiet = o.quiet;
  rp.clock_override = o.clock_override;
  run_replay(rp);

  // 4. Compare.
  const E2eComparison c = compare_e2e(out / "modeled", out / "measured");
  write_e2e(c, out);
  nlohmann::ordered_json man;
  man["tool"] = "kvsim-validate e2e";
  man["kvsim_version"] = kvsim_version();
  man["scenario"] = o.scenario.string();
  try {
    man["scenario_hash"] = nlohmann::json::parse(read_text(out / "modeled" / "manifest.json"))
                               .value("scenario_hash", std::string());
  } catch (const nlohmann::json::exception&) {
    man["scenario_hash"] = "";
  }
  man["backend"] = o.backend;
  man["gpu"] = gpu.name;
  man["scenario_as_run"] = scenario_path == o.scenario ? o.scenario.string() : "scenario.yaml";
  man["peaks"] = {{"fp16_flops", gpu.fp16_flops},
                  {"hbm_bytes_per_s", gpu.hbm_bytes_per_s},
                  {"source", gpu.source}};
  man["repeats"] = o.repeats;
  man["threads"] = o.threads;
  man["seed"] = o.seed;
  man["profile"] = "calibration/profile.yaml";
  man["iteration_overhead_s"] = overhead.iteration_overhead_s;
  for (const OverheadProbe& p : overhead.probes) {
    man["overhead_probes"].push_back(
        {{"batch", p.name}, {"measured_s", p.measured_s}, {"modeled_ops_s", p.ops_s}});
  }
  write_file_atomic(out / "manifest.json", man.dump(2) + "\n");
  if (o.plot) render_e2e_figure(out);
  if (!o.quiet) {
    fmt::print("4/4 compare (errors: (modeled - measured) / measured)\n{}", e2e_table(c));
    fmt::print("wrote {0}/e2e.json, e2e_iterations.csv, e2e_requests.csv{1}\n", out.string(),
               o.plot ? ", e2e.png" : "");
  }
  return c;
}

}  // namespace kvsim::validate
