// The serving figures `vllm bench serve` reports, computed the same way on a measured run and on
// kvsim's run of it: TTFT mean/p50/p90/p99, TPOT mean/p50/p99, E2E mean/p99 and throughput.
// Percentiles interpolate linearly between order statistics (NumPy's default, which
// vllm/benchmarks/serve.py uses through np.percentile).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kvsim::validate {

// One finished request: its arrival and latencies in seconds (tpot absent for one output token).
struct ServedRequest {
  double arrival_s = 0;
  int64_t output_tokens = 0;
  double ttft_s = 0;
  double e2e_s = 0;
  std::optional<double> tpot_s;
};

// The metrics in report order: name ("ttft_mean_s", ...) and value.
using ServingMetrics = std::vector<std::pair<std::string, double>>;

// p in [0, 100] of `v` (sorted or not), linear between order statistics. Requires: !v.empty().
double serving_percentile(std::vector<double> v, double p);

// TTFT mean/p50/p90/p99, TPOT mean/p50/p99, E2E mean/p99 (seconds), output_throughput_tok_s and
// request_throughput_req_s (over first arrival to last finish). Requires: !requests.empty().
ServingMetrics serving_metrics(const std::vector<ServedRequest>& requests);

// Completed requests of a `kvsim run` requests.csv, in file order. Throws InputError naming the
// file and line on a malformed row.
std::vector<ServedRequest> read_kvsim_requests(const std::filesystem::path& requests_csv);

}  // namespace kvsim::validate
