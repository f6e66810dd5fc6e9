// Memory-bandwidth probe: how many bytes per second the device moves when nothing else limits it.
// Versions:
//   v1  grid-stride loops over 16-byte vectors, a few blocks per SM; copy reads n and writes n
//       bytes, read reads n bytes into per-warp sums that one atomic per warp adds to a sink.
#include <algorithm>
#include <string>

#include "core/errors.h"
#include "kernels/cuda_common.cuh"

namespace kvsim::kernels::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    copy_v1(const uint4* __restrict__ src, uint4* __restrict__ dst, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n; i += stride) {
    dst[i] = src[i];
  }
}

__global__ void __launch_bounds__(kThreads)
    read_v1(const ulonglong2* __restrict__ src, int64_t n, unsigned long long* sink) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  unsigned long long sum = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n; i += stride) {
    const ulonglong2 w = src[i];
    sum += w.x + w.y;
  }
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (threadIdx.x % 32 == 0) atomicAdd(sink, sum);
}

unsigned grid_for(int64_t vectors) {
  static const int sms = [] {
    int n = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0));
    return n;
  }();
  const int64_t wanted = (vectors + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(wanted, int64_t{sms} * 8)));
}

void require_multiple_of_16(int64_t bytes) {
  if (bytes <= 0 || bytes % 16 != 0) {
    throw InputError("membw: bytes must be a positive multiple of 16, got " +
                     std::to_string(bytes));
  }
}

}  // namespace

void membw_copy(int version, const void* src, void* dst, int64_t bytes) {
  require_multiple_of_16(bytes);
  if (version != 1) throw_bad_version("membw", version);
  const int64_t n = bytes / 16;
  copy_v1<<<grid_for(n), kThreads>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), n);
  CUDA_CHECK_LAUNCH();
}

void membw_read(int version, const void* src, int64_t bytes, uint64_t* sink) {
  require_multiple_of_16(bytes);
  if (version != 1) throw_bad_version("membw", version);
  const int64_t n = bytes / 16;
  read_v1<<<grid_for(n), kThreads>>>(static_cast<const ulonglong2*>(src), n,
                                     reinterpret_cast<unsigned long long*>(sink));
  CUDA_CHECK_LAUNCH();
}

}  // namespace kvsim::kernels::cuda
