// Attention of one sequence's new tokens (a prefill chunk, or one decode token) over its KV in
// the paged pool, float32, for the replay's CPU forward pass. Query token i (absolute position
// kv_before + i) sees keys 0 .. kv_before + i: causal within the chunk, everything before it.
//
// Why not kernels/cpu_ref: those kernels store results at FP16/BF16 (their Precision has no
// float32), accept head_dim 64 or 128 only, and paged_decode_cpu wants one context length for
// the whole batch. Here each KV head's blocks are gathered through the block table into a
// contiguous [context, head_dim] K and V (one copy of what the chunk reads), then each tile of
// query tokens (all query heads of that KV head, GQA) runs as two Eigen GEMMs, S = Q K^T and
// O = softmax(S) V, over the keys up to the tile's last visible one; the masked keys inside
// the tile's diagonal are zeroed before PV. vLLM's CPU backend splits the work the same way:
// scaled-dot-product attention for prompts, paged attention for decodes
// (vllm/attention/backends/torch_sdpa.py, vllm/v1/attention/backends/cpu_attn.py).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "validate/replay/paged_kv_pool.h"

namespace kvsim::validate {

struct AttentionDims {
  int heads = 1;
  int kv_heads = 1;
  int head_dim = 64;
};

// Scratch buffers reused across calls (grown, never shrunk).
struct AttentionScratch {
  std::vector<float> k;       // [context, head_dim]
  std::vector<float> v;       // [context, head_dim]
  std::vector<float> q;       // [tile rows, head_dim]
  std::vector<float> scores;  // [tile rows, context]
  std::vector<float> out;     // [tile rows, head_dim]
};

// q: `new_tokens` rows of heads x head_dim floats, `q_stride` floats apart (after RoPE).
// out: the same layout, `out_stride` apart. The pool must hold the chunk's own K and V already.
void paged_chunk_attention(const PagedKvPool& pool, int layer, std::span<const int32_t> table,
                           const AttentionDims& d, int64_t kv_before, int64_t new_tokens,
                           const float* q, int64_t q_stride, float* out, int64_t out_stride,
                           AttentionScratch& scratch);

}  // namespace kvsim::validate
