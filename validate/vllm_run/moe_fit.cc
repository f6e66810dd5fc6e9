#include "validate/vllm_run/moe_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include <Eigen/Dense>

#include "core/errors.h"
#include "models/latency/fused_moe.h"
#include "validate/vllm_run/llmservingsim_bundle.h"

namespace kvsim::validate {

std::vector<MoeRow> read_moe_csv(const std::filesystem::path& path) {
  const BundleCsv csv = read_bundle_csv(path);
  const size_t c_t = csv.col("tokens"), c_e = csv.col("activated_experts"),
               c_us = csv.col("time_us");
  std::vector<MoeRow> rows;
  for (size_t i = 0; i < csv.rows.size(); ++i) {
    const MoeRow r{csv.num(i, c_t), csv.num(i, c_e), csv.num(i, c_us) * 1e-6};
    if (r.tokens < 1 || r.activated < 1 || !(r.seconds > 0)) {
      throw InputError(
          fmt::format("{}:{}: expected tokens >= 1, activated_experts >= 1 and "
                      "time_us > 0",
                      path.string(), csv.lines[i]));
    }
    rows.push_back(r);
  }
  return rows;
}

MoeFit fit_routed_experts(const std::vector<MoeRow>& rows, const MoeShape& s,
                          const std::string& source) {
  // Features of a row: 1, weight seconds at the peak, FLOP seconds at the peak.
  auto features = [&](const MoeRow& r) {
    const RoutedExpertsWork w = routed_experts_work(r.tokens * s.topk, r.activated, s.hidden,
                                                    s.expert_ffn, s.bytes_per_weight);
    return Eigen::Vector3d(1.0, w.weight_bytes / s.hbm_bytes_per_s, w.flops / s.flops_per_s);
  };
  std::vector<const MoeRow*> train;
  MoeFit f;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i % 2 == 0)
      train.push_back(&rows[i]);
    else
      f.test.push_back(rows[i]);
  }
  if (train.size() < 3) {
    throw InputError(
        fmt::format("moe.csv: {} train rows; the fused-MoE fit needs at least 3 "
                    "(6 rows in the file)",
                    train.size()));
  }
  // Relative least squares: each row divided by its measured time, the target 1.
  auto solve = [&](bool with_constant) {
    const int k = with_constant ? 3 : 2;
    Eigen::MatrixXd A(static_cast<Eigen::Index>(train.size()), k);
    for (size_t i = 0; i < train.size(); ++i) {
      const Eigen::Vector3d x = features(*train[i]) / train[i]->seconds;
      A.row(static_cast<Eigen::Index>(i)) = with_constant
                                                ? Eigen::RowVectorXd(x.transpose())
                                                : Eigen::RowVectorXd(x.tail<2>().transpose());
    }
    const Eigen::VectorXd ones = Eigen::VectorXd::Ones(A.rows());
    const Eigen::VectorXd c = A.colPivHouseholderQr().solve(ones);
    return with_constant ? Eigen::Vector3d(c(0), c(1), c(2)) : Eigen::Vector3d(0.0, c(0), c(1));
  };
  Eigen::Vector3d c = solve(true);
  if (c(0) < 0) c = solve(false);
  if (!(c(1) > 0) || !(c(2) > 0)) {
    throw InputError(
        fmt::format("moe.csv: the fused-MoE fit gives a non-positive weight or FLOP "
                    "coefficient ({:.3g}, {:.3g}); the rows do not grow with experts "
                    "and tokens",
                    c(1), c(2)));
  }
  f.train_rows = static_cast<int>(train.size());
  f.cost.fitted = true;
  f.cost.constant_s = c(0);
  f.cost.memory_efficiency = std::clamp(1.0 / c(1), 1e-3, 10.0);
  f.cost.compute_efficiency = std::clamp(1.0 / c(2), 1e-3, 10.0);
  f.cost.source = source;
  double abs = 0;
  for (const MoeRow& r : f.test) {
    const RoutedExpertsWork w = routed_experts_work(r.tokens * s.topk, r.activated, s.hidden,
                                                    s.expert_ffn, s.bytes_per_weight);
    const double p = routed_experts_seconds(f.cost, w, s.hbm_bytes_per_s, s.flops_per_s);
    f.test_predicted.push_back(p);
    abs += std::abs(p / r.seconds - 1);
  }
  f.test_mape = f.test.empty() ? 0.0 : abs / static_cast<double>(f.test.size());
  return f;
}

}  // namespace kvsim::validate
