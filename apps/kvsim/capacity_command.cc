// `kvsim capacity SCENARIO.yaml --slo ttft_p99_s=2,tpot_p99_s=0.1 -o DIR [--search KEY]
// [--over KEY=VALUES]...`: the largest load meeting an SLO, or the cheapest configuration serving
// the scenario's load (sim/capacity/capacity_search.h; docs/capacity.md). Writes
// DIR/capacity.csv and the probes' run folders; --plot draws DIR/plots/capacity.png.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "apps/kvsim/commands.h"
#include "core/atomic_file.h"
#include "core/config_node.h"
#include "core/config_patch.h"
#include "models/catalog.h"
#include "sim/capacity/capacity_search.h"

namespace kvsim::cli {

namespace {

// "gpu=b200 tensor_parallel=2": a configuration by its --over values ("the scenario" without).
std::string config_label(const CapacityReport& r, const CapacityConfig& c) {
  std::string what;
  for (size_t i = 0; i < c.values.size(); ++i) {
    what += fmt::format("{}{}={}", i ? " " : "", r.over_keys[i], c.values[i]);
  }
  return what.empty() ? "the scenario" : what;
}

struct CapacityArgs {
  std::string scenario;
  std::string out_dir;
  std::string slo;
  double min_availability = 0.99;
  std::vector<std::string> sets;
  std::vector<std::string> over;
  int jobs = 0;
  bool no_progress = false;
  bool plot = false;
  CapacityOptions options;
};

void capacity(CapacityArgs& a) {
  check_output_folder(a.out_dir);
  CapacityOptions& o = a.options;
  o.source = a.scenario;
  YAML::Node tree = ConfigNode::parse_file(a.scenario).yaml();
  for (const auto& s : a.sets) apply_set_in_place(tree, s);
  o.scenario = tree;
  o.sets = a.sets;
  o.criterion = parse_capacity_criterion(a.slo, a.min_availability);
  for (const auto& v : a.over) o.over.push_back(parse_capacity_axis(v));
  o.sweep.out_dir = a.out_dir;
  o.sweep.jobs =
      a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.sweep.progress = !a.no_progress && isatty(STDERR_FILENO);
  const CapacityReport r = run_capacity(o, Catalog::builtin());
  AtomicFile csv(std::filesystem::path(a.out_dir) / "capacity.csv");
  csv.append(capacity_csv(r));
  csv.commit();
  fmt::print("capacity {}: policy {}, SLO {}{}\n", a.scenario, r.policy, r.criterion.text(),
             r.search_key.empty()
                 ? std::string()
                 : fmt::format(", search {} (tolerance {:g})", r.search_key, o.tolerance));
  fmt::print("{}", capacity_table(r));
  if (r.configs.size() > 1) {
    if (r.cheapest >= 0) {
      const CapacityConfig& c = r.configs[r.cheapest];
      fmt::print("cheapest meeting the SLO at the scenario's load: {} ({} GPUs, ${:.2f}/h)\n",
                 config_label(r, c), c.cost.gpus, c.cost.cost_per_hour_usd());
    } else {
      fmt::print("no {}configuration meets the SLO at the scenario's load\n",
                 r.unpriced.empty() ? "" : "priced ");
    }
  }
  if (!r.unpriced.empty()) {
    std::string which;
    for (int i : r.unpriced) {
      const CapacityConfig& c = r.configs[i];
      which +=
          fmt::format("{}{} (gpu {})", which.empty() ? "" : ", ", config_label(r, c), c.cost.gpu);
    }
    fmt::print(
        "unpriced, left out of the cheapest{}: {}; give their GPUs a price with the "
        "scenario's cost: block\n",
        r.search_key.empty() ? "" : " and the Pareto front", which);
  }
  fmt::print(
      "probes: {} run, {} already complete\nresults: {}/capacity.csv, the probes' run "
      "folders under {}/\n",
      r.points_run, r.points_skipped, a.out_dir, a.out_dir);
  if (a.plot) {
    std::fflush(stdout);
    run_data_script(kPlotScript, {a.out_dir});
    fmt::print("figures: {}/plots/\n", a.out_dir);
  }
}

}  // namespace

void add_capacity_command(CLI::App& app) {
  auto a = std::make_shared<CapacityArgs>();
  auto* cmd = app.add_subcommand(
      "capacity",
      "the largest load meeting an SLO (--search), or the cheapest configuration "
      "(--over) serving the scenario's load");
  cmd->add_option("scenario", a->scenario, "scenario YAML file")->required();
  cmd->add_option("-o,--out", a->out_dir, "result folder (re-running into it resumes)")->required();
  cmd->add_option("--slo", a->slo,
                  "bounds a probe must meet, e.g. ttft_p99_s=2,tpot_p99_s=0.1 "
                  "(<ttft|tpot|e2e>_<p50|p90|p99|mean>_s, slo_attainment)")
      ->required();
  cmd->add_option("--min-availability", a->min_availability,
                  "a probe must also complete this share of its requests (0: no bound)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--search", a->options.search_key,
                  "numeric scenario key to maximise, e.g. workload.arrivals.rate (starts at its "
                  "value in the scenario)");
  cmd->add_option("--tolerance", a->options.tolerance,
                  "stop when the bracket (last pass, first fail) is this close (relative)")
      ->check(CLI::Range(1e-6, 1.0))
      ->capture_default_str();
  cmd->add_flag("--integer", a->options.integer,
                "the searched key takes whole numbers (a client count): probe integers only");
  cmd->add_option("--max-rounds", a->options.max_rounds, "most rounds of probes per search")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--over", a->over,
                  "configurations to compare: KEY=a,b,c or KEY=lo..hi (repeatable; a grid)");
  cmd->add_option("--policy", a->options.policy,
                  "the policy whose figures count (default: the scenario's first)");
  cmd->add_option("--set", a->sets, "override a scenario key: path=value (repeatable)");
  cmd->add_option("-j,--jobs", a->jobs, "probes run at once on threads (default: the cores)")
      ->check(CLI::Range(1, 4096));
  cmd->add_flag("--no-progress", a->no_progress, "no progress line on stderr");
  cmd->add_flag("--plot", a->plot, "also draw DIR/plots/capacity.png");
  cmd->add_option("--max-events", a->options.sweep.run.max_events,
                  "stop a runaway probe after this many events")
      ->capture_default_str();
  cmd->add_option("--max-sim-time", a->options.sweep.run.max_sim_time_s,
                  "stop a runaway probe at this simulated time (s)")
      ->capture_default_str();
  cmd->callback([a] { capacity(*a); });
}

}  // namespace kvsim::cli
