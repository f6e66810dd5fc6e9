#include "validate/vllm_run/sampler_fit.h"

#include <algorithm>

#include <Eigen/Dense>

namespace kvsim::validate {

namespace {

double sampler_past_knee(double sequences, double knee) { return std::max(0.0, sequences - knee); }

// Weighted least squares: rows scaled by 1 / measured, so the residuals are relative errors.
Eigen::VectorXd sampler_solve(const std::vector<std::pair<double, double>>& points, double knee,
                              int params) {
  Eigen::MatrixXd x(static_cast<Eigen::Index>(points.size()), params);
  Eigen::VectorXd y(static_cast<Eigen::Index>(points.size()));
  for (size_t i = 0; i < points.size(); ++i) {
    const auto r = static_cast<Eigen::Index>(i);
    const auto [n, us] = points[i];
    x(r, 0) = 1 / us;
    x(r, 1) = n / us;
    if (params == 3) x(r, 2) = sampler_past_knee(n, knee) / us;
    y(r) = 1;
  }
  return x.colPivHouseholderQr().solve(y);
}

}  // namespace

double SamplerFit::us(double sequences) const {
  return constant_us + per_sequence_us * sequences +
         past_l2_us * sampler_past_knee(sequences, l2_sequences);
}

SamplerFit fit_sampler(const std::vector<std::pair<double, double>>& points, double l2_sequences) {
  SamplerFit f;
  f.l2_sequences = l2_sequences;
  std::vector<std::pair<double, double>> timed;  // a zero time has no relative error
  for (const auto& p : points) {
    if (p.second > 0) timed.push_back(p);
  }
  if (timed.size() < 2) return f;
  const auto past = std::count_if(timed.begin(), timed.end(),
                                  [&](const auto& p) { return p.first > l2_sequences; });
  if (past >= 2 && timed.size() >= 3) {
    const Eigen::VectorXd c = sampler_solve(timed, l2_sequences, 3);
    if (c(2) > 0) {
      f.constant_us = c(0), f.per_sequence_us = c(1), f.past_l2_us = c(2);
      return f;
    }
  }
  const Eigen::VectorXd c = sampler_solve(timed, l2_sequences, 2);
  f.constant_us = c(0), f.per_sequence_us = c(1);
  return f;
}

}  // namespace kvsim::validate
