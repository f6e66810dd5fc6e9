// The forward pass's linear layers: Y [m, n] = X [m, k] * W [n, k]^T in float32 with Eigen (the
// same GEMM as kernels::gemm_cpu, which `kvsim-validate measure --backend cpu` times, without its
// output rounding). With threads > 1 the n output columns are split into that many slices, one
// thread each (Eigen itself runs single-threaded in a build without OpenMP).
#pragma once

#include <cstdint>

namespace kvsim::validate {

void linear_f32(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k,
                int threads);

}  // namespace kvsim::validate
