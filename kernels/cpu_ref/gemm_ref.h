// CPU GEMM at a linear layer's shape: Y [m, n] = X [m, k] * W [n, k]^T (W stored as PyTorch's
// nn.Linear stores its weight). A double reference and the CPU backend's float kernel.
#pragma once

#include <span>

#include "kernels/cpu_ref/precision.h"
#include "kernels/cpu_ref/shapes.h"

namespace kvsim::kernels {

void gemm_reference(const GemmShape& s, std::span<const float> x, std::span<const float> w,
                    std::span<float> y);
// Float accumulation (Eigen's blocked GEMM), output rounded to `p` (cuBLAS with FP32 compute
// and FP16/BF16 output).
void gemm_cpu(const GemmShape& s, Precision p, std::span<const float> x, std::span<const float> w,
              std::span<float> y);

}  // namespace kvsim::kernels
