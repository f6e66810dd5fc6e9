#include "sim/metrics/latency_stats.h"

#include <algorithm>
#include <cmath>

#include "sim/metrics/sort_doubles.h"

namespace kvsim {

LatencyStats latency_stats(std::vector<double> v) {
  LatencyStats s;
  s.count = static_cast<int64_t>(v.size());
  if (v.empty()) return s;
  sort_doubles(v);
  auto pct = [&](double p) {
    const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  s.p50 = pct(50);
  s.p90 = pct(90);
  s.p99 = pct(99);
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  return s;
}

void LatencySamples::add_to_sketch(double seconds) {
  sketch_.add(std::llround(seconds * 1e9));  // latencies are whole ns but TPOT (a quotient)
  sum_s_ += seconds;
}

void LatencySamples::add(double seconds) {
  if (sketched_) return add_to_sketch(seconds);
  if (exact_.size() < exact_limit_) return exact_.push_back(seconds);
  sketched_ = true;
  for (double x : exact_) add_to_sketch(x);
  exact_ = {};  // frees the samples
  add_to_sketch(seconds);
}

LatencyStats LatencySamples::stats() const {
  if (!sketched_) return latency_stats(exact_);
  LatencyStats s = sketch_.stats_seconds();
  s.mean = static_cast<double>(sum_s_ / static_cast<long double>(s.count));
  return s;
}

}  // namespace kvsim
