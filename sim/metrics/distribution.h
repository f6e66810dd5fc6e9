// Streaming distributions of per-iteration figures (batch size, batch tokens, iteration time):
// a run can have millions of iterations, so unlike latency_stats (which keeps every sample) these
// keep counts per bucket only.
//   CountDistribution: exact counts of non-negative integers (memory: one entry per distinct
//     value, at most the largest batch), so its percentiles equal latency_stats' on the samples.
//   LogDistribution: durations in SimTime ns, bucketed geometrically (bucket k holds
//     [g^k, g^(k+1)) ns, g = 1.01); a percentile reads the bucket's geometric middle, within
//     0.5% of the true order statistic (relative); the mean is exact (a running sum).
// Both interpolate between order statistics as latency_stats does (NumPy's default).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include "core/int128.h"
#include "core/sim_time.h"

namespace kvsim {

struct LatencyStats;

// An exact running sum of integers (128 bits: a run's sums of ns or batch sizes never come
// near), so any order of addition, or a count of equal values added at once, gives the same
// sum. The value is read as a long double (exact below 2^64).
class ExactSum {
 public:
  void add(int64_t v) { sum_ += v; }
  void add(int64_t v, int64_t count) { sum_ += static_cast<Int128>(v) * count; }
  void add_sum(Int128 sum) { sum_ += sum; }  // values whose sum is known
  long double value() const { return static_cast<long double>(sum_); }
  Int128 exact() const { return sum_; }

 private:
  Int128 sum_ = 0;
};

// A fixed-bin histogram for the figure: `counts[i]` samples in [edges[i], edges[i + 1]).
struct Histogram {
  std::vector<double> edges;
  std::vector<int64_t> counts;
};

class CountDistribution {
 public:
  // Values in [0, kDenseLimit) count in a vector indexed by value (an add per iteration: a map
  // lookup was a visible share of a long run); others, in a map.
  static constexpr int64_t kDenseLimit = int64_t{1} << 16;
  void add(int64_t value) { add(value, 1); }
  void add(int64_t value, int64_t count) {  // `count` add(value)s
    if (static_cast<uint64_t>(value) < dense_.size()) {
      dense_[static_cast<size_t>(value)] += count;
    } else {
      add_outside(value, count);
    }
    n_ += count;
    sum_.add(value, count);
  }
  int64_t count() const { return n_; }
  // Adds every sample of `other` (a cluster's replicas into the cluster's distribution): the
  // same as adding them one by one.
  void merge(const CountDistribution& other);
  LatencyStats stats() const;
  // At most `max_bins` equal-width bins of whole numbers over [min, max + 1).
  Histogram histogram(int max_bins = 32) const;

 private:
  std::vector<int64_t> dense_;         // count by value
  std::map<int64_t, int64_t> sparse_;  // values outside the dense range
  int64_t n_ = 0;
  ExactSum sum_;
  // past dense_'s size: grow it, or count in sparse_
  void add_outside(int64_t value, int64_t count);
  // (value, count) of every value seen, in increasing value order.
  std::vector<std::pair<double, int64_t>> runs() const;
};

class LogDistribution {
 public:
  static constexpr double kGrowth = 1.01;  // bucket width ratio: <= 0.5% relative error
  // The bucket of `ns`: floor(log(ns) / log(kGrowth)), -1 for ns <= 0.
  static int64_t bucket_of(SimTime ns);
  // bucket_of(ns), without the logarithm when ns is in the bucket last computed (an iteration's
  // duration drifts slowly), whose exact range of ns it keeps: bucket_of is non-decreasing in ns
  // below kCachedBelowNs (see the .cc), so a bucket is the ns from its first to the next one's.
  int64_t bucket(SimTime ns);
  static constexpr SimTime kCachedBelowNs = SimTime{1} << 43;  // 2.4 hours
  void add(SimTime ns);
  // add() of at(0), at(1), ..., at(count - 1), which never decrease (a decode run's step
  // durations) and sum to `sum`: a search per bucket met instead of a lookup per value.
  template <typename At>
  void add_sorted(int64_t count, At at, Int128 sum) {
    for (int64_t j = 0; j < count;) {
      const SimTime v = at(j);
      const int64_t b = bucket(v);
      // bucket() leaves the bucket's range cached unless v is outside the cached span: then it
      // is one value alone. Else the values up to the first above the range are in it.
      int64_t end = j + 1;
      if (v >= cached_lo_ && v <= cached_hi_) {
        for (int64_t hi = count; end < hi;) {
          const int64_t mid = end + (hi - end) / 2;
          if (at(mid) <= cached_hi_) {
            end = mid + 1;
          } else {
            hi = mid;
          }
        }
      }
      count_in(b, end - j);
      j = end;
    }
    n_ += count;
    sum_ns_.add_sum(sum);
  }
  int64_t count() const { return n_; }
  // Adds every sample of `other`, bucket by bucket: the same as adding them one by one.
  void merge(const LogDistribution& other);
  LatencyStats stats_seconds() const;  // in seconds
  Histogram histogram_seconds(int max_bins = 32) const;

 private:
  // Count by bucket + 1 (bucket -1 holds 0 ns), grown as larger buckets appear: ~3,500 entries
  // reach 10^6 s. A vector, not a map: an add per iteration.
  std::vector<int64_t> counts_;
  void count_in(int64_t bucket, int64_t count);  // counts_, without n_ and the sum
  int64_t n_ = 0;
  ExactSum sum_ns_;
  // Bucket cached_bucket_ is the ns in [cached_lo_, cached_hi_] (empty: lo > hi).
  int64_t cached_bucket_ = 0;
  SimTime cached_lo_ = 1, cached_hi_ = 0;
  std::vector<SimTime> first_ns_;  // by bucket: its smallest ns (0: not computed yet)
  SimTime first_ns(int64_t bucket);
  static double middle_seconds(int64_t bucket);
  std::vector<std::pair<double, int64_t>> runs_seconds() const;  // (middle, count), by bucket
};

}  // namespace kvsim
