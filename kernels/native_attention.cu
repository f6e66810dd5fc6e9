// Native attention, the way an unfused framework runs it: S = scale * Q K^T is written to global
// memory, a softmax kernel rewrites it in place as P, and O = P V reads it back. Its workspace is
// the B*H*Sq*Skv score matrix at the input precision.
// Versions:
//   v1  cuBLAS strided-batched GEMMs (FP32 accumulation) + one thread block per softmax row.
// GQA without copies: Q's heads for one KV head are adjacent ([G*Sq, D] rows), so each GEMM batch
// is one (batch, KV head) pair with G*Sq rows, the layout a repeat_interleave would produce.
#include <cfloat>

#include "kernels/cuda_common.cuh"

namespace kvsim::kernels::cuda {

namespace {

constexpr int kSoftmaxThreads = 256;

__device__ float block_reduce(float v, bool is_max, float* scratch) {
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read from the previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kSoftmaxThreads / 32 ? scratch[lane] : (is_max ? -FLT_MAX : 0.0f);
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  return v;
}

// One block per row of S ([rows, seq_kv], row r is query r % seq_q). Masked keys become 0.
template <typename T>
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_rows_v1(T* s, int64_t rows, int seq_q, int seq_kv, bool causal) {
  __shared__ float scratch[kSoftmaxThreads / 32];
  const int64_t r = blockIdx.x;
  if (r >= rows) return;
  T* row = s + r * seq_kv;
  const int i = static_cast<int>(r % seq_q);
  const int visible = causal ? min(seq_kv, i + 1 + (seq_kv - seq_q)) : seq_kv;
  float mx = -FLT_MAX;
  for (int j = threadIdx.x; j < visible; j += kSoftmaxThreads) mx = fmaxf(mx, to_float(row[j]));
  mx = block_reduce(mx, true, scratch);
  float sum = 0;
  for (int j = threadIdx.x; j < visible; j += kSoftmaxThreads) sum += __expf(to_float(row[j]) - mx);
  sum = block_reduce(sum, false, scratch);
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < seq_kv; j += kSoftmaxThreads) {
    row[j] = from_float<T>(j < visible ? __expf(to_float(row[j]) - mx) * inv : 0.0f);
  }
}

template <typename T>
void run_v1(const AttentionShape& s, Precision p, const void* q, const void* k, const void* v,
            void* o, void* workspace) {
  const cudaDataType_t t = cuda_dtype(p);
  const int64_t g_rows = s.group() * s.seq_q;  // rows of one GEMM batch
  const int batches = static_cast<int>(s.batch * s.kv_heads);
  const float scale = 1.0f / sqrtf(static_cast<float>(s.head_dim));
  const float zero = 0.0f, one = 1.0f;
  cublasHandle_t h = cublas_handle();
  // Column-major view: S^T [Skv x G*Sq] = K [Skv x D] * Q^T [D x G*Sq].
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(s.seq_kv), static_cast<int>(g_rows),
      static_cast<int>(s.head_dim), &scale, k, t, static_cast<int>(s.head_dim),
      s.seq_kv * s.head_dim, q, t, static_cast<int>(s.head_dim), g_rows * s.head_dim, &zero,
      workspace, t, static_cast<int>(s.seq_kv), g_rows * s.seq_kv, batches, CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
  const int64_t rows = s.batch * s.heads * s.seq_q;
  softmax_rows_v1<T><<<static_cast<unsigned>(rows), kSoftmaxThreads>>>(
      static_cast<T*>(workspace), rows, static_cast<int>(s.seq_q), static_cast<int>(s.seq_kv),
      s.causal);
  CUDA_CHECK_LAUNCH();
  // O^T [D x G*Sq] = V^T [D x Skv] * P^T [Skv x G*Sq].
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(s.head_dim), static_cast<int>(g_rows),
      static_cast<int>(s.seq_kv), &one, v, t, static_cast<int>(s.head_dim), s.seq_kv * s.head_dim,
      workspace, t, static_cast<int>(s.seq_kv), g_rows * s.seq_kv, &zero, o, t,
      static_cast<int>(s.head_dim), g_rows * s.head_dim, batches, CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
}

}  // namespace

void native_attention(int version, const AttentionShape& s, Precision p, const void* q,
                      const void* k, const void* v, void* o, void* workspace) {
  s.validate();
  switch (version) {
    case 1:
      if (p == Precision::kFp16) {
        run_v1<__half>(s, p, q, k, v, o, workspace);
      } else {
        run_v1<__nv_bfloat16>(s, p, q, k, v, o, workspace);
      }
      return;
    default: throw_bad_version("native", version);
  }
}

}  // namespace kvsim::kernels::cuda
