// Paged decode attention: one new query token per sequence against its KV cache, which lives in
// blocks of block_size tokens scattered over the cache through a block table (vLLM's layout,
// kernels/cpu_ref/shapes.h). GQA/MQA through h / (H / Hkv). Any block size from 1 to 256 works;
// the grid measures 8..64 so the effect of the block size is measured, not assumed.
// Versions:
//   v1  one thread block (4 warps) per (sequence, query head). A group of D/8 threads holds one
//       token (16 bytes = 8 elements per thread), so a warp reads 32/(D/8) tokens per step; each
//       group keeps its own online-softmax state, merged through shared memory at the end.
//       KV heads shared by a GQA group are re-read per query head (the L2 usually serves the
//       repeats).
#include <cfloat>

#include "kernels/cuda_common.cuh"

namespace kvsim::kernels::cuda {

namespace {

constexpr int kThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;

struct Dims {
  int heads, kv_heads, context, block_size, blocks_per_seq;
  float scale_log2;
};

template <typename T>
__device__ __forceinline__ void unpack8(const uint4& raw, float* out) {
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = to_float(e[i]);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    paged_v1(const T* __restrict__ q, const T* __restrict__ kc, const T* __restrict__ vc,
             const int32_t* __restrict__ table, T* __restrict__ o, Dims d) {
  constexpr int kTpt = D / 8;                // threads per token
  constexpr int kPerWarp = 32 / kTpt;        // tokens per warp step
  constexpr int kGroups = kThreads / kTpt;   // tokens per block step
  __shared__ float red_m[kGroups], red_l[kGroups];
  __shared__ float red_acc[kGroups][D];

  const int h = blockIdx.x, b = blockIdx.y;
  const int kvh = h / (d.heads / d.kv_heads);
  const int warp = threadIdx.x / 32;
  const int group = threadIdx.x / kTpt;       // token slot within the block step
  const int sub = threadIdx.x % kTpt;         // which 8 elements of the token
  const int in_warp = (threadIdx.x % 32) / kTpt;

  float qv[8];
  unpack8<T>(reinterpret_cast<const uint4*>(q + (static_cast<int64_t>(b) * d.heads + h) * D)[sub], qv);
#pragma unroll
  for (int i = 0; i < 8; ++i) qv[i] *= d.scale_log2;
  const int32_t* bt = table + static_cast<int64_t>(b) * d.blocks_per_seq;

  float m = -INFINITY, l = 0.0f, acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  // The loop bound is uniform across the warp so that every lane takes part in the shuffles.
  for (int t0 = warp * kPerWarp; t0 < d.context; t0 += kGroups) {
    const int t = t0 + in_warp;
    const bool valid = t < d.context;
    float dot = 0.0f;
    int64_t base = 0;
    if (valid) {
      const int block = bt[t / d.block_size];
      base = ((static_cast<int64_t>(block) * d.kv_heads + kvh) * d.block_size + t % d.block_size) * D;
      float kv[8];
      unpack8<T>(reinterpret_cast<const uint4*>(kc + base)[sub], kv);
#pragma unroll
      for (int i = 0; i < 8; ++i) dot += qv[i] * kv[i];
    }
#pragma unroll
    for (int off = kTpt / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    if (valid) {
      const float m_new = fmaxf(m, dot);
      const float alpha = exp2f(m - m_new);
      const float p = exp2f(dot - m_new);
      float vv[8];
      unpack8<T>(reinterpret_cast<const uint4*>(vc + base)[sub], vv);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] = acc[i] * alpha + p * vv[i];
      l = l * alpha + p;
      m = m_new;
    }
  }

  if (sub == 0) {
    red_m[group] = m;
    red_l[group] = l;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) red_acc[group][sub * 8 + i] = acc[i];
  __syncthreads();
  float big = -INFINITY;
  for (int g = 0; g < kGroups; ++g) big = fmaxf(big, red_m[g]);
  float total = 0.0f;
  for (int g = 0; g < kGroups; ++g) {
    if (red_m[g] != -INFINITY) total += red_l[g] * exp2f(red_m[g] - big);
  }
  T* out = o + (static_cast<int64_t>(b) * d.heads + h) * D;
  for (int c = threadIdx.x; c < D; c += kThreads) {
    float sum = 0.0f;
    for (int g = 0; g < kGroups; ++g) {
      if (red_m[g] != -INFINITY) sum += red_acc[g][c] * exp2f(red_m[g] - big);
    }
    out[c] = from_float<T>(sum / total);
  }
}

template <typename T, int D>
void launch_v1(const PagedDecodeShape& s, const void* q, const void* kc, const void* vc,
               const int32_t* table, void* o) {
  const Dims d{static_cast<int>(s.heads), static_cast<int>(s.kv_heads), static_cast<int>(s.context),
               static_cast<int>(s.block_size), static_cast<int>(s.blocks_per_seq()),
               kLog2e / sqrtf(static_cast<float>(D))};
  const dim3 grid(static_cast<unsigned>(s.heads), static_cast<unsigned>(s.batch));
  paged_v1<T, D><<<grid, kThreads>>>(static_cast<const T*>(q), static_cast<const T*>(kc),
                                     static_cast<const T*>(vc), table, static_cast<T*>(o), d);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void dispatch(int version, const PagedDecodeShape& s, const void* q, const void* kc,
              const void* vc, const int32_t* table, void* o) {
  switch (version) {
    case 1:
      return s.head_dim == 64 ? launch_v1<T, 64>(s, q, kc, vc, table, o)
                              : launch_v1<T, 128>(s, q, kc, vc, table, o);
    default: throw_bad_version("paged_decode", version);
  }
}

}  // namespace

void paged_decode(int version, const PagedDecodeShape& s, Precision p, const void* q,
                  const void* k_cache, const void* v_cache, const int32_t* block_table, void* o) {
  s.validate();
  if (p == Precision::kFp16) {
    dispatch<__half>(version, s, q, k_cache, v_cache, block_table, o);
  } else {
    dispatch<__nv_bfloat16>(version, s, q, k_cache, v_cache, block_table, o);
  }
}

}  // namespace kvsim::kernels::cuda
