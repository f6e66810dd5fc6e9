#include "kernels/cpu_ref/gemm_ref.h"

#include <Eigen/Core>

#include "core/check.h"

namespace kvsim::kernels {

namespace {

void check_sizes(const GemmShape& s, size_t x, size_t w, size_t y) {
  s.validate();
  KVSIM_CHECK(x == static_cast<size_t>(s.m * s.k) && w == static_cast<size_t>(s.n * s.k) &&
                  y == static_cast<size_t>(s.m * s.n),
              "gemm {}: buffers x={} w={} y={}", s.describe(), x, w, y);
}

}  // namespace

void gemm_reference(const GemmShape& s, std::span<const float> x, std::span<const float> w,
                    std::span<float> y) {
  check_sizes(s, x.size(), w.size(), y.size());
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      double acc = 0;
      for (int64_t c = 0; c < s.k; ++c) acc += static_cast<double>(x[i * s.k + c]) * w[j * s.k + c];
      y[i * s.n + j] = static_cast<float>(acc);
    }
  }
}

void gemm_cpu(const GemmShape& s, Precision p, std::span<const float> x, std::span<const float> w,
              std::span<float> y) {
  check_sizes(s, x.size(), w.size(), y.size());
  // Eigen's blocked float GEMM: the one the replay's CPU forward pass runs its linear layers with
  // (validate/replay/cpu_linear.cc), so the CPU profile that `kvsim-validate calibrate` fits
  // from these timings describes that forward pass. Then the output's rounding to `p`, as cuBLAS
  // writes FP16/BF16.
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const Mat> xm(x.data(), s.m, s.k);
  const Eigen::Map<const Mat> wm(w.data(), s.n, s.k);
  Eigen::Map<Mat> ym(y.data(), s.m, s.n);
  ym.noalias() = xm * wm.transpose();
  round_all(p, y);
}

}  // namespace kvsim::kernels
