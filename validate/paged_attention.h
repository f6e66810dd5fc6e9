// Attention of one sequence's new tokens (a prefill chunk, or one decode token) over its KV in
// the paged pool, float32, for the replay's CPU forward pass. Query token i (absolute position
// kv_before + i) sees keys 0 .. kv_before + i: causal within the chunk, everything before it.
//
// Why not kernels/cpu_ref: those kernels accept head_dim 64 or 128 only, and paged_decode_cpu
// wants one context length for the whole batch. Here each KV head's
// blocks are gathered through the block table into a contiguous [context, head_dim] K and V (one
// copy of what the chunk reads: gather_kv_head), then each tile of query tokens (all query heads
// of that KV head, GQA) runs as two Eigen GEMMs, S = Q K^T and O = softmax(S) V, over the keys
// up to the tile's last visible one; the masked keys inside the tile's diagonal are zeroed before
// PV (kv_head_attention). vLLM's CPU backend splits the work the same way: scaled-dot-product
// attention for prompts, paged attention for decodes (vllm/attention/backends/torch_sdpa.py,
// vllm/v1/attention/backends/cpu_attn.py).
//
// The two steps are callable on raw arrays so the CPU calibration backend (cpu_backend.cc) times
// exactly this code: its flash cases run kv_head_attention over the case's contiguous K/V, its
// paged_decode cases gather_kv_head through the case's block table and then kv_head_attention.
// Lives in validate/ (not validate/replay/) for that reason.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "validate/paged_kv_pool.h"

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

// Where the query (or output) rows of one KV head's group live: row (token i, group member g) is
// the head_dim floats at base + i * token_stride + g * head_stride.
struct HeadRows {
  int64_t token_stride = 0;
  int64_t head_stride = 0;
};

// Copies the first `context` positions of KV head `kv_head` through `table` into scratch.k and
// scratch.v ([context, head_dim] each). k_cache / v_cache hold blocks laid out
// [num_blocks, kv_heads, block_tokens, head_dim] (one layer of the pool, or a kernel case's cache).
void gather_kv_head(const float* k_cache, const float* v_cache, int kv_heads, int64_t block_tokens,
                    int64_t head_dim, std::span<const int32_t> table, int64_t context, int kv_head,
                    AttentionScratch& scratch);

// Attention of `new_tokens` query tokens x `group` query heads sharing one KV head over the
// contiguous k, v ([kv_before + new_tokens, head_dim] each). Causal: token i sees keys
// 0 .. kv_before + i; not causal: every key. k and v may alias scratch.k and scratch.v.
void kv_head_attention(const float* k, const float* v, int64_t kv_before, int64_t new_tokens,
                       int64_t group, int64_t head_dim, bool causal, const float* q,
                       HeadRows q_rows, float* out, HeadRows out_rows, AttentionScratch& scratch);

// q: `new_tokens` rows of heads x head_dim floats, `q_stride` floats apart (after RoPE).
// out: the same layout, `out_stride` apart. The pool must hold the chunk's own K and V already.
void paged_chunk_attention(const PagedKvPool& pool, int layer, std::span<const int32_t> table,
                           const AttentionDims& d, int64_t kv_before, int64_t new_tokens,
                           const float* q, int64_t q_stride, float* out, int64_t out_stride,
                           AttentionScratch& scratch);

}  // namespace kvsim::validate
