// The comparison step of `kvsim-validate e2e`: the latency model (a `kvsim run` folder) against
// the measured replay (a `kvsim-validate replay` folder) of the same scenario, per iteration and
// per request. docs/fidelity.md "kvsim-validate e2e" explains each figure.
//
// Per iteration (measured/iterations.csv: the same batch, the model's seconds beside the measured
// ones): the signed relative error e = (modeled - measured) / measured of every iteration; per
// group its MAPE (mean |e|), median and p90 of e, and the two time totals. Groups: all, by batch
// shape (prefill-only, decode-only, mixed) and by batched tokens (prefill tokens + decode
// sequences) in the bins 1-7, 8-63, 64-511, 512+.
//
// Per request (modeled/requests.csv against measured/requests.csv, matched by policy and id):
// TTFT, TPOT and E2E where both sides have the figure: each side's median and p90, their relative
// errors (modeled - measured) / measured, the per-request relative errors' CDF (quantiles 0, 0.1,
// ..., 1) and median |e|; preemptions (sum of the column) and the outcome counts side by side.
//
// Percentiles are linear interpolation between order statistics (NumPy's default), as in
// docs/metrics.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace kvsim::validate {

struct IterationGroup {
  std::string kind;  // "all", "shape" or "tokens"
  std::string name;  // "all"; "prefill-only", "decode-only", "mixed"; "1-7", "8-63", ...
  int64_t iterations = 0;
  double mape = 0;
  double median_rel_error = 0;
  double p90_rel_error = 0;
  double modeled_s = 0;  // sums over the group's iterations
  double measured_s = 0;
};

struct MetricCompare {
  std::string metric;    // "ttft", "tpot", "e2e"
  int64_t requests = 0;  // requests with the figure on both sides
  double modeled_median = 0, modeled_p90 = 0;
  double measured_median = 0, measured_p90 = 0;
  double median_rel_error = 0;  // (modeled_median - measured_median) / measured_median
  double p90_rel_error = 0;
  double median_abs_request_error = 0;  // median over requests of |modeled - measured| / measured
  std::vector<std::pair<double, double>> cdf;  // (quantile, per-request signed relative error)
};

struct PolicyCompare {
  std::string policy;
  int64_t matched = 0;                 // ids present on both sides
  std::vector<MetricCompare> metrics;  // ttft, tpot, e2e
  int64_t modeled_preemptions = 0, measured_preemptions = 0;
  std::map<std::string, int64_t> modeled_outcomes, measured_outcomes;
  bool outcomes_identical() const { return modeled_outcomes == measured_outcomes; }
};

struct E2eComparison {
  std::vector<IterationGroup> iterations;  // "all" first, then shapes, then token bins
  std::vector<PolicyCompare> policies;     // in measured/requests.csv order
};

// Reads the two folders; throws InputError "<file>:<line>: ..." on a missing file, column or bad
// value.
E2eComparison compare_e2e(const std::filesystem::path& modeled_dir,
                          const std::filesystem::path& measured_dir);

// Writes out_dir/e2e.json (everything), e2e_iterations.csv (the groups) and e2e_requests.csv (one
// row per policy and metric). Floats with 9 significant digits.
void write_e2e(const E2eComparison& c, const std::filesystem::path& out_dir);

// The one-screen text table printed on stdout.
std::string e2e_table(const E2eComparison& c);

}  // namespace kvsim::validate
