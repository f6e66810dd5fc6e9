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

Histogram bin(const std::vector<std::pair<double, int64_t>>& runs, double lo, double hi, int bins) {
  Histogram h;
  if (runs.empty()) return h;
  bins = std::max(bins, 1);
  const double width = (hi - lo) / bins;
  for (int i = 0; i <= bins; ++i) h.edges.push_back(lo + width * i);
  h.counts.assign(static_cast<size_t>(bins), 0);
  for (const auto& [v, c] : runs) {
    const auto i =
        std::clamp<int64_t>(static_cast<int64_t>(std::floor((v - lo) / width)), 0, bins - 1);
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

void CountDistribution::add_outside(int64_t value, int64_t count) {
  if (value >= 0 && value < kDenseLimit) {
    dense_.resize(
        std::min<size_t>(std::max<size_t>(2 * static_cast<size_t>(value), 64), kDenseLimit));
    dense_[static_cast<size_t>(value)] += count;
  } else {
    sparse_[value] += count;
  }
}

void CountDistribution::merge(const CountDistribution& other) {
  for (size_t v = 0; v < other.dense_.size(); ++v) {
    if (other.dense_[v] > 0) add(static_cast<int64_t>(v), other.dense_[v]);
  }
  for (const auto& [v, c] : other.sparse_) add(v, c);
}

LatencyStats CountDistribution::stats() const {
  return stats_of(runs(), n_, n_ ? sum_.value() / n_ : 0.0L);
}

Histogram CountDistribution::histogram(int max_bins) const {
  if (n_ == 0) return {};
  // The smallest and largest value seen: a negative one in sparse_, else the first counted in
  // dense_, else sparse_'s first (all past dense_); the largest likewise from the other end.
  int64_t lo = 0, hi = 0;
  const auto first_dense =
      std::find_if(dense_.begin(), dense_.end(), [](int64_t c) { return c > 0; });
  const auto last_dense =
      std::find_if(dense_.rbegin(), dense_.rend(), [](int64_t c) { return c > 0; });
  if (!sparse_.empty() && sparse_.begin()->first < 0) {
    lo = sparse_.begin()->first;
  } else if (first_dense != dense_.end()) {
    lo = first_dense - dense_.begin();
  } else {
    lo = sparse_.begin()->first;
  }
  if (!sparse_.empty() && sparse_.rbegin()->first >= 0) {
    hi = sparse_.rbegin()->first + 1;
  } else if (last_dense != dense_.rend()) {
    hi = dense_.rend() - last_dense;  // the last counted value + 1
  } else {
    hi = sparse_.rbegin()->first + 1;
  }
  // Whole-number bins: each bin spans the same number of integers.
  const int64_t per = (hi - lo + max_bins - 1) / max_bins;
  const int bins = static_cast<int>((hi - lo + per - 1) / per);
  return bin(runs(), static_cast<double>(lo), static_cast<double>(lo + per * bins), bins);
}

int64_t LogDistribution::bucket_of(SimTime ns) {
  return ns <= 0 ? -1
                 : static_cast<int64_t>(
                       std::floor(std::log(static_cast<double>(ns)) / std::log(kGrowth)));
}

// Why bucket_of is non-decreasing for 1 <= ns < 2^43: between consecutive integers x and x + 1
// the logarithm grows by more than 1 / (x + 1) > 2^-43, which is 32 ulps of any logarithm
// below 2^5 (log(2^43) = 29.8); libm's log is within about half an ulp of the true value
// (glibc: 0.52), so the computed logarithms keep their order, and a correctly rounded division
// by a positive constant and floor keep it too.
int64_t LogDistribution::bucket(SimTime ns) {
  if (ns >= cached_lo_ && ns <= cached_hi_) return cached_bucket_;
  const int64_t b = bucket_of(ns);
  if (ns > 0 && ns < kCachedBelowNs) {
    cached_bucket_ = b;
    cached_lo_ = first_ns(b);
    cached_hi_ = std::min(first_ns(b + 1), kCachedBelowNs) - 1;
  }
  return b;
}

// The smallest ns >= 1 in bucket `b` or later: from g^b, corrected by bucket_of itself (the
// estimate is within a few ns; the loops settle it exactly, given bucket_of's order).
SimTime LogDistribution::first_ns(int64_t b) {
  const auto i = static_cast<size_t>(b);
  if (i >= first_ns_.size()) first_ns_.resize(std::max<size_t>(i + 1, 2 * first_ns_.size()), 0);
  SimTime& first = first_ns_[i];
  if (first > 0) return first;
  auto x = std::max<SimTime>(1, static_cast<SimTime>(std::pow(kGrowth, static_cast<double>(b))));
  while (x > 1 && bucket_of(x - 1) >= b) --x;
  while (bucket_of(x) < b) ++x;
  first = x;
  return x;
}

void LogDistribution::add(SimTime ns) {
  count_in(bucket(ns), 1);
  ++n_;
  sum_ns_.add(ns);
}

void LogDistribution::count_in(int64_t bucket, int64_t count) {
  const auto i = static_cast<size_t>(bucket + 1);
  if (i >= counts_.size()) counts_.resize(std::max<size_t>(i + 1, 2 * counts_.size()));
  counts_[i] += count;
}

void LogDistribution::merge(const LogDistribution& other) {
  for (size_t i = 0; i < other.counts_.size(); ++i) {
    if (other.counts_[i] > 0) count_in(static_cast<int64_t>(i) - 1, other.counts_[i]);
  }
  n_ += other.n_;
  sum_ns_.add_sum(other.sum_ns_.exact());
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
  return stats_of(runs_seconds(), n_, n_ ? sum_ns_.value() / n_ / 1e9L : 0.0L);
}

Histogram LogDistribution::histogram_seconds(int max_bins) const {
  const std::vector<std::pair<double, int64_t>> runs = runs_seconds();
  if (runs.empty()) return {};
  const double lo = runs.front().first, hi = runs.back().first;
  return bin(runs, lo, hi > lo ? hi * (1 + 1e-9) : lo + 1e-6, max_bins);
}

}  // namespace kvsim
