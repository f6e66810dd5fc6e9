// Paged decode attention: one new query token per sequence against its KV cache, which lives in
// blocks of block_size tokens scattered over the cache through a block table (vLLM's layout,
// kernels/cpu_ref/shapes.h). GQA/MQA through h / (H / Hkv). Any block size from 1 to 256 works;
// the grid measures 8..64 so the effect of the block size is measured, not assumed.
// Two entry points share the kernel: paged_decode (every sequence `context` tokens, Q, O and the
// block tables packed) and paged_decode_varlen (vLLM's paged_attention with seq_lens: each
// sequence its own context, and Q, O and the tables read with strides, as the CUDA forward pass
// of validate/replay/ calls it on its token rows).
// Versions:
//   v1  one thread block (4 warps) per (sequence, query head). A group of D/8 threads holds one
//       token (16 bytes = 8 elements per thread), so a warp reads 32/(D/8) tokens per step; each
//       group keeps its own online-softmax state, merged through shared memory at the end.
//       KV heads shared by a GQA group are re-read per query head (the L2 usually serves the
//       repeats).
#include <cfloat>

#include "core/errors.h"
#include "kernels/cuda_common.cuh"

namespace kvsim::kernels::cuda {

namespace {

constexpr int kThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;

// contexts == nullptr: every sequence has `context` tokens; otherwise sequence b has contexts[b].
struct Dims {
  int heads, kv_heads, context, block_size, table_stride;
  int64_t q_stride, o_stride;
  const int32_t* contexts;
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
  constexpr int kTpt = D / 8;               // threads per token
  constexpr int kPerWarp = 32 / kTpt;       // tokens per warp step
  constexpr int kGroups = kThreads / kTpt;  // tokens per block step
  __shared__ float red_m[kGroups], red_l[kGroups];
  __shared__ float red_acc[kGroups][D];

  const int h = blockIdx.x, b = blockIdx.y;
  const int context = d.contexts != nullptr ? d.contexts[b] : d.context;
  const int kvh = h / (d.heads / d.kv_heads);
  const int warp = threadIdx.x / 32;
  const int group = threadIdx.x / kTpt;  // token slot within the block step
  const int sub = threadIdx.x % kTpt;    // which 8 elements of the token
  const int in_warp = (threadIdx.x % 32) / kTpt;

  float qv[8];
  const T* qh = q + b * d.q_stride + static_cast<int64_t>(h) * D;
  unpack8<T>(reinterpret_cast<const uint4*>(qh)[sub], qv);
#pragma unroll
  for (int i = 0; i < 8; ++i) qv[i] *= d.scale_log2;
  const int32_t* bt = table + static_cast<int64_t>(b) * d.table_stride;

  float m = -INFINITY, l = 0.0f, acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  // The loop bound is uniform across the warp so that every lane takes part in the shuffles.
  for (int t0 = warp * kPerWarp; t0 < context; t0 += kGroups) {
    const int t = t0 + in_warp;
    const bool valid = t < context;
    float dot = 0.0f;
    int64_t base = 0;
    if (valid) {
      const int block = bt[t / d.block_size];
      base =
          ((static_cast<int64_t>(block) * d.kv_heads + kvh) * d.block_size + t % d.block_size) * D;
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
  T* out = o + b * d.o_stride + static_cast<int64_t>(h) * D;
  for (int c = threadIdx.x; c < D; c += kThreads) {
    float sum = 0.0f;
    for (int g = 0; g < kGroups; ++g) {
      if (red_m[g] != -INFINITY) sum += red_acc[g][c] * exp2f(red_m[g] - big);
    }
    out[c] = from_float<T>(sum / total);
  }
}

template <typename T, int D>
void launch_v1(int64_t batch, const Dims& d, const void* q, const void* kc, const void* vc,
               const int32_t* table, void* o) {
  const dim3 grid(static_cast<unsigned>(d.heads), static_cast<unsigned>(batch));
  paged_v1<T, D><<<grid, kThreads>>>(static_cast<const T*>(q), static_cast<const T*>(kc),
                                     static_cast<const T*>(vc), table, static_cast<T*>(o), d);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void dispatch(int version, int64_t batch, int64_t head_dim, const Dims& d, const void* q,
              const void* kc, const void* vc, const int32_t* table, void* o) {
  switch (version) {
    case 1:
      return head_dim == 64 ? launch_v1<T, 64>(batch, d, q, kc, vc, table, o)
                            : launch_v1<T, 128>(batch, d, q, kc, vc, table, o);
    default: throw_bad_version("paged_decode", version);
  }
}

void run(int version, Precision p, int64_t batch, int64_t head_dim, const Dims& d, const void* q,
         const void* kc, const void* vc, const int32_t* table, void* o) {
  if (p == Precision::kFp16) {
    dispatch<__half>(version, batch, head_dim, d, q, kc, vc, table, o);
  } else {
    dispatch<__nv_bfloat16>(version, batch, head_dim, d, q, kc, vc, table, o);
  }
}

float scale_log2(int64_t head_dim) { return kLog2e / sqrtf(static_cast<float>(head_dim)); }

}  // namespace

void paged_decode(int version, const PagedDecodeShape& s, Precision p, const void* q,
                  const void* k_cache, const void* v_cache, const int32_t* block_table, void* o) {
  s.validate();
  const Dims d{static_cast<int>(s.heads),
               static_cast<int>(s.kv_heads),
               static_cast<int>(s.context),
               static_cast<int>(s.block_size),
               static_cast<int>(s.blocks_per_seq()),
               s.heads * s.head_dim,
               s.heads * s.head_dim,
               nullptr,
               scale_log2(s.head_dim)};
  run(version, p, s.batch, s.head_dim, d, q, k_cache, v_cache, block_table, o);
}

void paged_decode_varlen(int version, const PagedDecodeVarlenShape& s, Precision p, const void* q,
                         const void* k_cache, const void* v_cache, const int32_t* block_tables,
                         const int32_t* contexts, void* o) {
  // The checks paged_decode makes on the heads, head_dim and block size, then the strides.
  PagedDecodeShape{s.batch, s.heads, s.kv_heads, s.head_dim, 1, s.block_size}.validate();
  const int64_t row = s.heads * s.head_dim;
  if (s.table_stride < 1 || s.q_stride < row || s.o_stride < row || s.q_stride % 8 != 0 ||
      s.o_stride % 8 != 0) {
    throw InputError("paged_decode_varlen: bad strides (table " + std::to_string(s.table_stride) +
                     ", q " + std::to_string(s.q_stride) + ", o " + std::to_string(s.o_stride) +
                     ") for " + std::to_string(s.heads) + " heads of " +
                     std::to_string(s.head_dim));
  }
  const Dims d{static_cast<int>(s.heads),
               static_cast<int>(s.kv_heads),
               0,
               static_cast<int>(s.block_size),
               static_cast<int>(s.table_stride),
               s.q_stride,
               s.o_stride,
               contexts,
               scale_log2(s.head_dim)};
  run(version, p, s.batch, s.head_dim, d, q, k_cache, v_cache, block_tables, o);
}

}  // namespace kvsim::kernels::cuda
