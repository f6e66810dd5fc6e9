#include "kernels/cpu_ref/gemm_ref.h"

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
  // Both operands are read along k, so the inner loop is two contiguous streams.
  for (int64_t i = 0; i < s.m; ++i) {
    const float* xi = &x[static_cast<size_t>(i * s.k)];
    for (int64_t j = 0; j < s.n; ++j) {
      const float* wj = &w[static_cast<size_t>(j * s.k)];
      float acc = 0;
      for (int64_t c = 0; c < s.k; ++c) acc += xi[c] * wj[c];
      y[static_cast<size_t>(i * s.n + j)] = round_to(p, acc);
    }
  }
}

}  // namespace kvsim::kernels
