// Shared by the .cu files: error checks, library handles, element-type helpers.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda_api.h"

namespace kvsim::kernels::cuda {

[[noreturn]] void throw_cuda(const char* expr, const char* file, int line, const std::string& msg);
// Throws InputError "<op>: unknown version N (have ...)".
[[noreturn]] void throw_bad_version(const char* op, int version);

cublasHandle_t cublas_handle();
cublasLtHandle_t cublaslt_handle();
// A workspace for cuBLASLt, allocated once.
void* cublaslt_workspace(size_t* bytes);

inline cudaDataType_t cuda_dtype(Precision p) {
  return p == Precision::kFp16 ? CUDA_R_16F : CUDA_R_16BF;
}

template <typename T>
__device__ __forceinline__ T from_float(float f);
template <>
__device__ __forceinline__ __half from_float<__half>(float f) {
  return __float2half_rn(f);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float f) {
  return __float2bfloat16_rn(f);
}
__device__ __forceinline__ float to_float(__half h) { return __half2float(h); }
__device__ __forceinline__ float to_float(__nv_bfloat16 h) { return __bfloat162float(h); }

}  // namespace kvsim::kernels::cuda

#define CUDA_CHECK(expr)                                                  \
  do {                                                                    \
    cudaError_t kvsim_err_ = (expr);                                      \
    if (kvsim_err_ != cudaSuccess)                                        \
      ::kvsim::kernels::cuda::throw_cuda(#expr, __FILE__, __LINE__,       \
                                         cudaGetErrorString(kvsim_err_)); \
  } while (0)

#define CUBLAS_CHECK(expr)                                                  \
  do {                                                                      \
    cublasStatus_t kvsim_st_ = (expr);                                      \
    if (kvsim_st_ != CUBLAS_STATUS_SUCCESS)                                 \
      ::kvsim::kernels::cuda::throw_cuda(#expr, __FILE__, __LINE__,         \
                                         cublasGetStatusString(kvsim_st_)); \
  } while (0)

// After a kernel launch: catches bad configurations at once (asynchronous faults surface at the
// next synchronising call).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
