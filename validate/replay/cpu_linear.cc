#include "validate/replay/cpu_linear.h"

#include <Eigen/Core>
#include <algorithm>
#include <thread>
#include <vector>

namespace kvsim::validate {

namespace {

using LinearMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void linear_slice(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k,
                  int64_t c0, int64_t cols) {
  const Eigen::Map<const LinearMat> xm(x, m, k);
  const Eigen::Map<const LinearMat> wm(w, n, k);
  Eigen::Map<LinearMat> ym(y, m, n);
  ym.middleCols(c0, cols).noalias() = xm * wm.middleRows(c0, cols).transpose();
}

}  // namespace

void linear_f32(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k,
                int threads) {
  if (m == 0 || n == 0) return;
  const int64_t parts = std::clamp<int64_t>(threads, 1, n);
  if (parts == 1) {
    linear_slice(x, w, y, m, n, k, 0, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(parts - 1));
  const int64_t step = (n + parts - 1) / parts;
  for (int64_t c0 = step; c0 < n; c0 += step) {
    pool.emplace_back(linear_slice, x, w, y, m, n, k, c0, std::min(step, n - c0));
  }
  linear_slice(x, w, y, m, n, k, 0, std::min(step, n));
  for (std::thread& t : pool) t.join();
}

}  // namespace kvsim::validate
