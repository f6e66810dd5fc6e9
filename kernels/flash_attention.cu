// Flash attention: tiles of Q against tiles of K/V with an online softmax, so the score matrix is
// never materialised (O(s) memory traffic instead of O(s^2)). Causal (bottom-right aligned), GQA
// and MQA (query head h reads KV head h / (H / Hkv)), any sequence length (tails zero-filled and
// masked).
// Versions:
//   v1  one thread per query row, scalar FP32: slow, simple, a GPU-side cross-check for v2.
//   v2  64 query rows per block (4 warps x 16 rows), 64-key tiles; QK^T and PV on tensor cores
//       through wmma 16x16x16 (FP16 or BF16 in, FP32 accumulate); scores, probabilities and the
//       FP32 output accumulator live in shared memory (104.5 KB at head dim 128).
#include <mma.h>

#include <cfloat>
#include <cmath>

#include "kernels/cuda_common.cuh"

namespace kvsim::kernels::cuda {

namespace {

constexpr float kLog2e = 1.4426950408889634f;

struct Dims {
  int heads, kv_heads, seq_q, seq_kv;
  bool causal;
  float scale_log2;  // softmax scale folded with log2(e): exp(x*scale) = exp2(x*scale_log2)
};

// ---- v1 ------------------------------------------------------------------------------------
template <typename T, int D>
__global__ void __launch_bounds__(128)
    flash_v1(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
             T* __restrict__ o, Dims d) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int h = blockIdx.y, b = blockIdx.z;
  if (i >= d.seq_q) return;
  const int kvh = h / (d.heads / d.kv_heads);
  const T* qi = q + ((static_cast<int64_t>(b) * d.heads + h) * d.seq_q + i) * D;
  const T* kb = k + (static_cast<int64_t>(b) * d.kv_heads + kvh) * d.seq_kv * D;
  const T* vb = v + (static_cast<int64_t>(b) * d.kv_heads + kvh) * d.seq_kv * D;
  const int visible = d.causal ? min(d.seq_kv, i + 1 + (d.seq_kv - d.seq_q)) : d.seq_kv;
  float acc[D];
  for (int c = 0; c < D; ++c) acc[c] = 0;
  float m = -INFINITY, l = 0;
  for (int j = 0; j < visible; ++j) {
    float dot = 0;
    for (int c = 0; c < D; ++c) dot += to_float(qi[c]) * to_float(kb[j * D + c]);
    const float sc = dot * d.scale_log2;
    const float m_new = fmaxf(m, sc);
    const float alpha = exp2f(m - m_new);
    const float pj = exp2f(sc - m_new);
    for (int c = 0; c < D; ++c) acc[c] = acc[c] * alpha + pj * to_float(vb[j * D + c]);
    l = l * alpha + pj;
    m = m_new;
  }
  T* oi = o + ((static_cast<int64_t>(b) * d.heads + h) * d.seq_q + i) * D;
  for (int c = 0; c < D; ++c) oi[c] = from_float<T>(acc[c] / l);
}

// ---- v2 ------------------------------------------------------------------------------------
constexpr int kBr = 64;  // query rows per block
constexpr int kBc = 64;  // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

// Shared-memory layout with padded rows (fewer bank conflicts; every wmma pointer stays 32-byte
// aligned because each region and each 16-row step is a multiple of 32 bytes).
template <typename T, int D>
struct Smem {
  static constexpr int kLdT = D + 8;    // Q, K, V rows
  static constexpr int kLdS = kBc + 4;  // FP32 scores
  static constexpr int kLdP = kBc + 8;  // probabilities
  static constexpr int kLdO = D + 4;    // FP32 output accumulator
  static constexpr size_t kQ = 0;
  static constexpr size_t kK = kQ + sizeof(T) * kBr * kLdT;
  static constexpr size_t kV = kK + sizeof(T) * kBc * kLdT;
  static constexpr size_t kS = kV + sizeof(T) * kBc * kLdT;
  static constexpr size_t kP = kS + sizeof(float) * kBr * kLdS;
  static constexpr size_t kO = kP + sizeof(T) * kBr * kLdP;
  static constexpr size_t kBytes = kO + sizeof(float) * kBr * kLdO;
};

// Copies rows [row0, row0 + 64) of a [rows, D] matrix into shared memory with 16-byte vectors;
// rows past the end are zero-filled.
template <typename T, int D>
__device__ void load_tile(T* dst, const T* src, int row0, int rows) {
  constexpr int kVecPerRow = D * static_cast<int>(sizeof(T)) / 16;
  constexpr int kLd = Smem<T, D>::kLdT;
  for (int idx = threadIdx.x; idx < kBr * kVecPerRow; idx += kThreads) {
    const int r = idx / kVecPerRow, c = idx % kVecPerRow;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (row0 + r < rows)
      val = reinterpret_cast<const uint4*>(src + static_cast<int64_t>(row0 + r) * D)[c];
    *reinterpret_cast<uint4*>(dst + r * kLd + c * (16 / static_cast<int>(sizeof(T)))) = val;
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    flash_v2(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
             T* __restrict__ o, Dims d) {
  namespace wmma = nvcuda::wmma;
  using L = Smem<T, D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem + L::kQ);
  T* ks = reinterpret_cast<T*>(smem + L::kK);
  T* vs = reinterpret_cast<T*>(smem + L::kV);
  float* ss = reinterpret_cast<float*>(smem + L::kS);
  T* ps = reinterpret_cast<T*>(smem + L::kP);
  float* os = reinterpret_cast<float*>(smem + L::kO);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int q0 = blockIdx.x * kBr, h = blockIdx.y, b = blockIdx.z;
  const int kvh = h / (d.heads / d.kv_heads);
  const T* qb = q + (static_cast<int64_t>(b) * d.heads + h) * d.seq_q * D;
  const T* kb = k + (static_cast<int64_t>(b) * d.kv_heads + kvh) * d.seq_kv * D;
  const T* vb = v + (static_cast<int64_t>(b) * d.kv_heads + kvh) * d.seq_kv * D;
  const int offset = d.seq_kv - d.seq_q;  // causal alignment

  load_tile<T, D>(qs, qb, q0, d.seq_q);
  for (int idx = threadIdx.x; idx < kBr * L::kLdO; idx += kThreads) os[idx] = 0.0f;
  // Running max and sum of this warp's 16 rows, replicated in every lane (all lanes compute the
  // same reductions), so they stay in registers.
  float row_m[16], row_l[16];
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    row_m[r] = -INFINITY;
    row_l[r] = 0.0f;
  }
  const int last_row = min(q0 + kBr, d.seq_q) - 1;
  const int kv_end = d.causal ? min(d.seq_kv, last_row + 1 + offset) : d.seq_kv;
  const int wr = warp * 16;  // this warp's first row in the tile

  for (int j0 = 0; j0 < kv_end; j0 += kBc) {
    __syncthreads();  // everyone is done with the previous K/V tile
    load_tile<T, D>(ks, kb, j0, d.seq_kv);
    load_tile<T, D>(vs, vb, j0, d.seq_kv);
    __syncthreads();

    // S[16 x 64] = Q[16 x D] K^T for this warp's rows.
#pragma unroll
    for (int n = 0; n < kBc / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> bt;
        wmma::load_matrix_sync(a, qs + wr * L::kLdT + kk * 16, L::kLdT);
        wmma::load_matrix_sync(bt, ks + (n * 16) * L::kLdT + kk * 16, L::kLdT);
        wmma::mma_sync(acc, a, bt, acc);
      }
      wmma::store_matrix_sync(ss + wr * L::kLdS + n * 16, acc, L::kLdS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax, one row at a time; lane handles keys lane and lane + 32.
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const int row = wr + r;
      const int gi = q0 + row;
      const int visible = d.causal ? min(d.seq_kv, gi + 1 + offset) : d.seq_kv;
      float s0 = ss[row * L::kLdS + lane] * d.scale_log2;
      float s1 = ss[row * L::kLdS + lane + 32] * d.scale_log2;
      if (j0 + lane >= visible) s0 = -INFINITY;
      if (j0 + lane + 32 >= visible) s1 = -INFINITY;
      float tmax = fmaxf(s0, s1);
      for (int off = 16; off > 0; off >>= 1)
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, off));
      const float m_new = fmaxf(row_m[r], tmax);
      float alpha = 1.0f, p0 = 0.0f, p1 = 0.0f;
      if (m_new != -INFINITY) {  // a row that sees nothing yet keeps its state
        alpha = exp2f(row_m[r] - m_new);
        p0 = exp2f(s0 - m_new);
        p1 = exp2f(s1 - m_new);
      }
      const T t0 = from_float<T>(p0), t1 = from_float<T>(p1);
      ps[row * L::kLdP + lane] = t0;
      ps[row * L::kLdP + lane + 32] = t1;
      // The sum uses the rounded probabilities the MMA will see, so O and l stay consistent.
      float psum = to_float(t0) + to_float(t1);
      for (int off = 16; off > 0; off >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, off);
      row_l[r] = row_l[r] * alpha + psum;
      row_m[r] = m_new;
      for (int c = lane; c < D; c += 32) os[row * L::kLdO + c] *= alpha;
    }
    __syncwarp();

    // O[16 x D] += P[16 x 64] V[64 x D].
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, os + wr * L::kLdO + n * 16, L::kLdO, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> bv;
        wmma::load_matrix_sync(a, ps + wr * L::kLdP + kk * 16, L::kLdP);
        wmma::load_matrix_sync(bv, vs + (kk * 16) * L::kLdT + n * 16, L::kLdT);
        wmma::mma_sync(acc, a, bv, acc);
      }
      wmma::store_matrix_sync(os + wr * L::kLdO + n * 16, acc, L::kLdO, wmma::mem_row_major);
    }
    __syncwarp();
  }

  // Normalise and write this warp's rows.
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int gi = q0 + wr + r;
    if (gi >= d.seq_q) continue;
    const float inv = 1.0f / row_l[r];
    T* orow = o + ((static_cast<int64_t>(b) * d.heads + h) * d.seq_q + gi) * D;
    for (int c = lane; c < D; c += 32) orow[c] = from_float<T>(os[(wr + r) * L::kLdO + c] * inv);
  }
}

template <typename T, int D>
void launch_v1(const AttentionShape& s, const Dims& d, const void* q, const void* k, const void* v,
               void* o) {
  const dim3 grid(static_cast<unsigned>((s.seq_q + 127) / 128), static_cast<unsigned>(s.heads),
                  static_cast<unsigned>(s.batch));
  flash_v1<T, D><<<grid, 128>>>(static_cast<const T*>(q), static_cast<const T*>(k),
                                static_cast<const T*>(v), static_cast<T*>(o), d);
  CUDA_CHECK_LAUNCH();
}

template <typename T, int D>
void launch_v2(const AttentionShape& s, const Dims& d, const void* q, const void* k, const void* v,
               void* o) {
  constexpr size_t kBytes = Smem<T, D>::kBytes;
  static const bool configured = [] {  // above 48 KB needs an explicit opt-in, once per kernel
    CUDA_CHECK(cudaFuncSetAttribute(flash_v2<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kBytes)));
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>((s.seq_q + kBr - 1) / kBr), static_cast<unsigned>(s.heads),
                  static_cast<unsigned>(s.batch));
  flash_v2<T, D><<<grid, kThreads, kBytes>>>(static_cast<const T*>(q), static_cast<const T*>(k),
                                             static_cast<const T*>(v), static_cast<T*>(o), d);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void dispatch(int version, const AttentionShape& s, const void* q, const void* k, const void* v,
              void* o) {
  const Dims d{static_cast<int>(s.heads),
               static_cast<int>(s.kv_heads),
               static_cast<int>(s.seq_q),
               static_cast<int>(s.seq_kv),
               s.causal,
               kLog2e / sqrtf(static_cast<float>(s.head_dim))};
  const bool d64 = s.head_dim == 64;
  switch (version) {
    case 1: return d64 ? launch_v1<T, 64>(s, d, q, k, v, o) : launch_v1<T, 128>(s, d, q, k, v, o);
    case 2: return d64 ? launch_v2<T, 64>(s, d, q, k, v, o) : launch_v2<T, 128>(s, d, q, k, v, o);
    default: throw_bad_version("flash", version);
  }
}

}  // namespace

void flash_attention(int version, const AttentionShape& s, Precision p, const void* q,
                     const void* k, const void* v, void* o) {
  s.validate();
  if (p == Precision::kFp16) {
    dispatch<__half>(version, s, q, k, v, o);
  } else {
    dispatch<__nv_bfloat16>(version, s, q, k, v, o);
  }
}

}  // namespace kvsim::kernels::cuda
