// The small kernels of the CUDA forward pass (cuda_forward.cu): weight init, embedding, RMSNorm
// (plain and fused with the residual add, as vLLM's fused_add_rms_norm), RoPE, the KV scatter
// into the paged pool (vLLM's reshape_and_cache), the gathers around the prefill flash attention,
// and SiLU-and-mul. The GEMMs, the prefill attention and the paged decode over sequences of
// different lengths are the project's (kernels/gemm.cu, kernels/flash_attention.cu,
// kernels/paged_decode.cu's paged_decode_varlen). All fp16 storage, float arithmetic, one
// rounding at each store (what the host reference in tests/replay_cuda/cuda_forward_test.cc
// repeats).
//
// Layouts: activations are token-major rows [T, width]; the qkv row of a token is
// [Q heads | K heads | V heads], each head_dim wide; one layer's K (or V) pool is
// [num_blocks, kv_heads, block_tokens, head_dim] (kernels/cpu_ref/shapes.h's paged layout);
// a token's slot is block * block_tokens + offset.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace kvsim::validate::cudafwd {

constexpr int kThreads = 256;

// Device-drawn weights: element i of a tensor is offset + scale * u, u uniform in [-1, 1) from a
// SplitMix64 hash of (the tensor's stream, i), so any tensor fills in parallel, in one pass.
__host__ __device__ inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

__global__ void init_weights(__half* dst, int64_t n, uint64_t stream, float offset, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t r = mix64(stream ^ static_cast<uint64_t>(i) * 0xd1b54a32d192ed03ull);
    const float u = static_cast<float>(r >> 40) * (2.0f / 16777216.0f) - 1.0f;
    dst[i] = __float2half_rn(offset + scale * u);
  }
}

__global__ void embed(const int32_t* ids, const __half* table, __half* x, int hidden) {
  const int64_t t = blockIdx.x;
  const __half* row = table + int64_t{ids[t]} * hidden;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) x[t * hidden + c] = row[c];
}

__device__ float block_sum(float v) {
  __shared__ float partial[kThreads / 32];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  __syncthreads();
  return total;
}

// out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w. One block (kThreads) per row.
__global__ void rms_norm(const __half* x, const __half* w, __half* out, int hidden, float eps) {
  const int64_t base = int64_t{blockIdx.x} * hidden;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < hidden; c += kThreads) {
    const float v = __half2float(x[base + c]);
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(hidden) + eps);
  for (int c = threadIdx.x; c < hidden; c += kThreads) {
    out[base + c] = __float2half_rn(__half2float(x[base + c]) * inv * __half2float(w[c]));
  }
}

// x[t] += delta[t] (rounded to fp16: the residual stream is fp16, as in vLLM), then out[t] is
// x[t]'s RMSNorm.
__global__ void add_rms_norm(__half* x, const __half* delta, const __half* w, __half* out,
                             int hidden, float eps) {
  const int64_t base = int64_t{blockIdx.x} * hidden;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < hidden; c += kThreads) {
    const __half s = __float2half_rn(__half2float(x[base + c]) + __half2float(delta[base + c]));
    x[base + c] = s;
    const float v = __half2float(s);
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(hidden) + eps);
  for (int c = threadIdx.x; c < hidden; c += kThreads) {
    out[base + c] = __float2half_rn(__half2float(x[base + c]) * inv * __half2float(w[c]));
  }
}

// x[t] += delta[t], fp16 (the last layer's residual, before the final norm of emitting rows).
__global__ void add_in_place(__half* x, const __half* delta, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = __float2half_rn(__half2float(x[i]) + __half2float(delta[i]));
  }
}

// Rotates the Q and K heads of every token in place: pair (i, i + D/2) by pos * base^(-2i/D).
// Grid: one block per token; threads over (head, i).
__global__ void rope(__half* qkv, const int32_t* pos, int rope_heads, int head_dim,
                     int64_t row_stride, float log2_base) {
  const int half = head_dim / 2;
  __half* row = qkv + int64_t{blockIdx.x} * row_stride;
  const float p = static_cast<float>(pos[blockIdx.x]);
  for (int j = threadIdx.x; j < rope_heads * half; j += blockDim.x) {
    const int h = j / half, i = j % half;
    const float inv_freq = exp2f(-log2_base * (2.0f * i) / static_cast<float>(head_dim));
    float s, c;
    sincosf(p * inv_freq, &s, &c);
    __half* e = row + int64_t{h} * head_dim;
    const float a = __half2float(e[i]), b = __half2float(e[i + half]);
    e[i] = __float2half_rn(a * c - b * s);
    e[i + half] = __float2half_rn(b * c + a * s);
  }
}

// Writes every token's K and V heads to its slot of this layer's pools.
__global__ void kv_scatter(const __half* qkv, const int64_t* slots, __half* k_pool, __half* v_pool,
                           int heads, int kv_heads, int head_dim, int block_tokens,
                           int64_t row_stride) {
  const int64_t t = blockIdx.x;
  const int64_t slot = slots[t];
  const int64_t block = slot / block_tokens, off = slot % block_tokens;
  const __half* k = qkv + t * row_stride + int64_t{heads} * head_dim;
  const __half* v = k + int64_t{kv_heads} * head_dim;
  for (int j = threadIdx.x; j < kv_heads * head_dim; j += blockDim.x) {
    const int h = j / head_dim, d = j % head_dim;
    const int64_t dst = ((block * kv_heads + h) * block_tokens + off) * head_dim + d;
    k_pool[dst] = k[j];
    v_pool[dst] = v[j];
  }
}

// Q of rows [row0, row0 + n) into [heads, n, head_dim] (flash attention's layout).
__global__ void gather_q(const __half* qkv, __half* q, int64_t row0, int n, int heads, int head_dim,
                         int64_t row_stride) {
  const int64_t total = int64_t{heads} * n * head_dim;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t d = e % head_dim, i = (e / head_dim) % n, h = e / (int64_t{head_dim} * n);
    q[e] = qkv[(row0 + i) * row_stride + h * head_dim + d];
  }
}

// A sequence's first `context` tokens of K and V from the pools into [kv_heads, context, D].
__global__ void gather_kv(const __half* k_pool, const __half* v_pool, const int32_t* table,
                          int context, int kv_heads, int head_dim, int block_tokens, __half* k,
                          __half* v) {
  const int64_t total = int64_t{kv_heads} * context * head_dim;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t d = e % head_dim, t = (e / head_dim) % context;
    const int64_t h = e / (int64_t{head_dim} * context);
    const int64_t src =
        ((int64_t{table[t / block_tokens]} * kv_heads + h) * block_tokens + t % block_tokens) *
            head_dim +
        d;
    k[e] = k_pool[src];
    v[e] = v_pool[src];
  }
}

// [heads, n, head_dim] back into rows [row0, row0 + n) of the [T, heads * head_dim] output.
__global__ void scatter_o(const __half* o, __half* out, int64_t row0, int n, int heads,
                          int head_dim) {
  const int64_t total = int64_t{heads} * n * head_dim;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t d = e % head_dim, i = (e / head_dim) % n, h = e / (int64_t{head_dim} * n);
    out[(row0 + i) * heads * head_dim + h * head_dim + d] = o[e];
  }
}

// out[t] = silu(gate[t]) * up[t], with gu[t] = [gate (F) | up (F)].
__global__ void silu_mul(const __half* gu, __half* out, int64_t rows, int ffn) {
  const int64_t total = rows * ffn;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = e / ffn, c = e % ffn;
    const float g = __half2float(gu[t * 2 * ffn + c]), u = __half2float(gu[t * 2 * ffn + ffn + c]);
    out[e] = __float2half_rn(g / (1.0f + expf(-g)) * u);
  }
}

__global__ void gather_rows(const __half* x, const int32_t* rows, __half* out, int width) {
  const int64_t r = blockIdx.x;
  for (int c = threadIdx.x; c < width; c += blockDim.x) {
    out[r * width + c] = x[int64_t{rows[r]} * width + c];
  }
}

}  // namespace kvsim::validate::cudafwd
