#include "sim/metrics/distribution.h"

#include <algorithm>
#include <cmath>

#include "sim/metrics/recorder.h"

namespace kvsim {

namespace {

// Percentiles as latency_stats computes them, over samples given as (value, count) in increasing
// value order.
template <typename Value>
LatencyStats stats_of(const std::vector<std::pair<double, int64_t>>& runs, int64_t n, Value mean) {
  LatencyStats s;
  s.count = n;
  if (n == 0) return s;
  // The value of the i-th order statistic (0-based).
  auto at = [&](int64_t i) {
    int64_t seen = 0;
    for (const auto& [v, c] : runs) {
      seen += c;
      if (i < seen) return v;
    }
    return runs.back().first;
  };
  auto pct = [&](double p) {
    const double pos = p / 100.0 * static_cast<double>(n - 1);
    const auto lo = static_cast<int64_t>(std::floor(pos));
    const int64_t hi = std::min(lo + 1, n - 1);
    const double vlo = at(lo), vhi = at(hi);
    return vlo + (vhi - vlo) * (pos - static_cast<double>(lo));
  };
  s.p50 = pct(50);
  s.p90 = pct(90);
  s.p99 = pct(99);
  s.mean = static_cast<double>(mean);
  return s;
}

Histogram bin(const std::vector<std::pair<double, int64_t>>& runs, double lo, double hi,
              int bins) {
  Histogram h;
  if (runs.empty()) return h;
  bins = std::max(bins, 1);
  const double width = (hi - lo) / bins;
  for (int i = 0; i <= bins; ++i) h.edges.push_back(lo + width * i);
  h.counts.assign(static_cast<size_t>(bins), 0);
  for (const auto& [v, c] : runs) {
    const auto i = std::clamp<int64_t>(static_cast<int64_t>(std::floor((v - lo) / width)), 0, bins - 1);
    h.counts[static_cast<size_t>(i)] += c;
  }
  return h;
}

}  // namespace

std::vector<std::pair<double, int64_t>> CountDistribution::runs() const {
  std::vector<std::pair<double, int64_t>> runs;
  auto sparse = sparse_.begin();
  for (; sparse != sparse_.end() && sparse->first < 0; ++sparse) {
    runs.emplace_back(static_cast<double>(sparse->first), sparse->second);
  }
  for (size_t v = 0; v < dense_.size(); ++v) {
    if (dense_[v] > 0) runs.emplace_back(static_cast<double>(v), dense_[v]);
  }
  for (; sparse != sparse_.end(); ++sparse) {
    runs.emplace_back(static_cast<double>(sparse->first), sparse->second);
  }
  return runs;
}

LatencyStats CountDistribution::stats() const {
  return stats_of(runs(), n_, n_ ? sum_ / n_ : 0.0L);
}

Histogram CountDistribution::histogram(int max_bins) const {
  if (n_ == 0) return {};
  const int64_t lo = min_, hi = max_ + 1;
  // Whole-number bins: each bin spans the same number of integers.
  const int64_t per = (hi - lo + max_bins - 1) / max_bins;
  const int bins = static_cast<int>((hi - lo + per - 1) / per);
  return bin(runs(), static_cast<double>(lo), static_cast<double>(lo + per * bins), bins);
}

void LogDistribution::add(SimTime ns) {
  const int64_t bucket =
      ns <= 0 ? -1 : static_cast<int64_t>(std::floor(std::log(static_cast<double>(ns)) / std::log(kGrowth)));
  const auto i = static_cast<size_t>(bucket + 1);
  if (i >= counts_.size()) counts_.resize(std::max<size_t>(i + 1, 2 * counts_.size()));
  ++counts_[i];
  ++n_;
  sum_ns_ += ns;
}

double LogDistribution::middle_seconds(int64_t bucket) {
  if (bucket < 0) return 0;
  // The geometric middle of [g^k, g^(k+1)): within sqrt(g) - 1 < 0.5% of any value in it.
  return std::pow(kGrowth, static_cast<double>(bucket) + 0.5) / 1e9;
}

std::vector<std::pair<double, int64_t>> LogDistribution::runs_seconds() const {
  std::vector<std::pair<double, int64_t>> runs;
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i] > 0) runs.emplace_back(middle_seconds(static_cast<int64_t>(i) - 1), counts_[i]);
  }
  return runs;
}

LatencyStats LogDistribution::stats_seconds() const {
  return stats_of(runs_seconds(), n_, n_ ? sum_ns_ / n_ / 1e9L : 0.0L);
}

Histogram LogDistribution::histogram_seconds(int max_bins) const {
  const std::vector<std::pair<double, int64_t>> runs = runs_seconds();
  if (runs.empty()) return {};
  const double lo = runs.front().first, hi = runs.back().first;
  return bin(runs, lo, hi > lo ? hi * (1 + 1e-9) : lo + 1e-6, max_bins);
}

}  // namespace kvsim
