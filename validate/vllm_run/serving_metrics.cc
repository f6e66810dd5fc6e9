#include "validate/vllm_run/serving_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include "core/csv_line.h"
#include "core/errors.h"

namespace kvsim::validate {

double serving_percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (rank - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

namespace {
double mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
}  // namespace

ServingMetrics serving_metrics(const std::vector<ServedRequest>& requests) {
  std::vector<double> ttft, tpot, e2e;
  double first = requests.front().arrival_s, last = 0;
  double tokens = 0;
  for (const ServedRequest& r : requests) {
    ttft.push_back(r.ttft_s);
    e2e.push_back(r.e2e_s);
    if (r.tpot_s) tpot.push_back(*r.tpot_s);
    first = std::min(first, r.arrival_s);
    last = std::max(last, r.arrival_s + r.e2e_s);
    tokens += static_cast<double>(r.output_tokens);
  }
  if (tpot.empty()) tpot.push_back(0);  // every request produced one token: no TPOT
  const double span = last - first;
  return {
      {"ttft_mean_s", mean(ttft)},
      {"ttft_p50_s", serving_percentile(ttft, 50)},
      {"ttft_p90_s", serving_percentile(ttft, 90)},
      {"ttft_p99_s", serving_percentile(ttft, 99)},
      {"tpot_mean_s", mean(tpot)},
      {"tpot_p50_s", serving_percentile(tpot, 50)},
      {"tpot_p99_s", serving_percentile(tpot, 99)},
      {"e2e_mean_s", mean(e2e)},
      {"e2e_p99_s", serving_percentile(e2e, 99)},
      {"output_throughput_tok_s", span > 0 ? tokens / span : 0.0},
      {"request_throughput_req_s", span > 0 ? static_cast<double>(requests.size()) / span : 0.0}};
}

std::vector<ServedRequest> read_kvsim_requests(const std::filesystem::path& requests_csv) {
  std::ifstream in(requests_csv);
  if (!in) throw InputError(fmt::format("{}: cannot read", requests_csv.string()));
  std::string line;
  std::vector<std::string> f, header;
  if (!std::getline(in, line) || !split_csv_line(line, header)) {
    throw InputError(fmt::format("{}:1: no header", requests_csv.string()));
  }
  auto col = [&](const char* name) {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) {
      throw InputError(fmt::format("{}:1: no column '{}'", requests_csv.string(), name));
    }
    return static_cast<size_t>(it - header.begin());
  };
  const size_t c_arr = col("arrival_s"), c_gen = col("generated"), c_out = col("outcome"),
               c_ttft = col("ttft_s"), c_tpot = col("tpot_s"), c_e2e = col("e2e_s");
  std::vector<ServedRequest> out;
  int n = 1;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    if (!split_csv_line(line, f) || f.size() != header.size()) {
      throw InputError(
          fmt::format("{}:{}: expected {} fields", requests_csv.string(), n, header.size()));
    }
    if (f[c_out] != "completed") continue;
    auto num = [&](size_t i) {
      try {
        return std::stod(f[i]);
      } catch (const std::logic_error&) {
        throw InputError(fmt::format("{}:{}: {}: expected a number, got \"{}\"",
                                     requests_csv.string(), n, header[i], f[i]));
      }
    };
    ServedRequest r;
    r.arrival_s = num(c_arr);
    r.output_tokens = static_cast<int64_t>(num(c_gen));
    r.ttft_s = num(c_ttft);
    r.e2e_s = num(c_e2e);
    if (!f[c_tpot].empty()) r.tpot_s = num(c_tpot);
    out.push_back(r);
  }
  return out;
}

}  // namespace kvsim::validate
