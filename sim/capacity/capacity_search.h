// `kvsim capacity` (docs/capacity.md): the largest load a configuration serves
// within an SLO, and the cheapest configuration that serves a load.
//
// Search (`--search KEY`): KEY is a numeric scenario key (workload.arrivals.rate, a client
// count). Rounds of probes, each round one sweep of up to `jobs` points run in parallel by
// run_sweep: while no probe failed, the largest passing value x 2, x 4, ...; while none passed,
// the smallest failing value / 2, / 4, ...; then evenly inside the bracket (last pass, first
// fail), until the bracket is within `tolerance` of the failing end (relative; for an integer
// key, `integer`, until the two are 1 apart). With one job this is bisection. Assumes the SLO holds
// below some load and fails above it (monotone); the answer is the largest passing value probed.
// The scenario's own value of KEY is the first probe.
//
// Over (`--over KEY=a,b,c` or `KEY=lo..hi`, repeatable): the grid of configurations (a sweep's
// grid). Without --search each configuration runs once at the scenario's load and the cheapest
// passing one wins; with --search each configuration gets its own search, and the configurations
// on the Pareto front of cost against attainable load are marked.
//
// Every probe is a sweep point folder (an ordinary run folder): DIR/points/ for a fixed-load
// grid, DIR/search/<config>/round-<r>/points/ for a search (DIR/search/round-<r>/ without
// --over). The rounds are a function of the inputs alone, so re-running into DIR resumes: a
// finished probe is not run again (run_sweep's resume).
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "sim/capacity/capacity_cost.h"
#include "sim/capacity/capacity_criterion.h"
#include "sim/sweep/sweep_runner.h"

namespace kvsim {

struct CapacityAxis {
  std::string key;
  std::vector<std::string> values;  // YAML scalars
  std::string text;                 // as given ("KEY=a,b,c"), named by a probe's errors
};
// "KEY=a,b,c" or "KEY=lo..hi" (integers lo <= hi, at most 4096 values). Throws InputError.
CapacityAxis parse_capacity_axis(const std::string& text);

struct CapacityOptions {
  std::string source;             // the scenario file (messages, relative paths)
  YAML::Node scenario;            // the scenario, --set applied (a `sweep:` block is not allowed)
  std::vector<std::string> sets;  // the --set assignments applied (a probe's errors name them)
  std::string policy;             // the policy the criterion reads; "" = the scenario's first
  CapacityCriterion criterion;
  std::string search_key;   // "" = run each configuration at the scenario's load
  double tolerance = 0.02;  // relative bracket width at which a search stops
  bool integer = false;     // the key takes whole numbers: probe integers, stop 1 apart
  int max_rounds = 40;
  std::vector<CapacityAxis> over;
  SweepOptions sweep;  // out_dir, jobs, progress, run options
};

struct CapacityProbe {
  double value = 0;
  bool met = false;
  std::string why;  // the bound missed
};

struct CapacityConfig {
  std::vector<std::string> values;  // per --over key
  std::string name;                 // its folder name ("" without --over)
  ConfigCost cost;
  // At the scenario's load (no search): whether it met the criterion.
  bool met = false;
  std::string why;
  // Search: the largest value that met (0: none did) and the smallest that failed (0: none).
  double max_load = 0;
  double fail_load = 0;
  std::vector<CapacityProbe> probes;  // in the order run
  std::vector<double> figures;        // the criterion's figures at the answer point (NaN: none)
  bool pareto = false;                // search with --over: on the cost / load front
};

struct CapacityReport {
  std::string policy;
  std::vector<std::string> over_keys;
  std::string search_key;
  double load = 0;  // the scenario's value of search_key (search only)
  CapacityCriterion criterion;
  std::vector<CapacityConfig> configs;
  int cheapest = -1;  // the cheapest priced configuration serving the scenario's load (-1: none)
  std::vector<int> unpriced;  // configurations with a GPU of no known price (indices into configs)
  size_t points_run = 0, points_skipped = 0;
};

// Throws ConfigError / InputError for a bad scenario, key or criterion, and what a probe throws.
CapacityReport run_capacity(const CapacityOptions& options, const Catalog& catalog);

std::string capacity_csv(const CapacityReport& report);    // DIR/capacity.csv
std::string capacity_table(const CapacityReport& report);  // what the command prints

}  // namespace kvsim
