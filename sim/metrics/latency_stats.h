// The statistics of one latency metric: percentiles and mean (LatencyStats), exact from the
// samples or, past a million of them, from a log-bucketed sketch (LatencySamples).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/metrics/distribution.h"

namespace kvsim {

struct LatencyStats {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;
  int64_t count = 0;
};
// Percentiles with linear interpolation between order statistics (NumPy's default).
LatencyStats latency_stats(std::vector<double> values);

// One latency metric's samples (10^8 requests in bounded memory). Exact, as
// latency_stats, up to `exact_limit` samples (every scenario, golden and test stays exact and
// byte-identical); the sample past it moves them all into a LogDistribution (geometric buckets,
// ratio 1.01: percentiles within kSketchRelError of the exact ones, relative; mean from a
// running sum), whose memory is one entry per bucket used (~2,300 buckets span 1 ns to 10^6 s).
class LatencySamples {
 public:
  static constexpr size_t kDefaultExactLimit = 1'000'000;
  static constexpr double kSketchRelError = 0.005;  // sqrt(1.01) - 1 < 0.5%
  explicit LatencySamples(size_t exact_limit = kDefaultExactLimit) : exact_limit_(exact_limit) {}
  void add(double seconds);
  bool sketched() const { return sketched_; }
  LatencyStats stats() const;

 private:
  size_t exact_limit_;
  bool sketched_ = false;
  std::vector<double> exact_;
  LogDistribution sketch_;  // in ns, once sketched
  long double sum_s_ = 0;   // the mean's running sum, once sketched
  void add_to_sketch(double seconds);
};

}  // namespace kvsim
