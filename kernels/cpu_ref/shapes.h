// The shapes the kernels run at, shared by the CUDA launchers, the CPU references and the harness.
// Layouts (row-major, contiguous):
//   attention  Q, O [batch, heads, seq_q, head_dim];  K, V [batch, kv_heads, seq_kv, head_dim]
//   paged      Q, O [batch, heads, head_dim];  K/V cache [num_blocks, kv_heads, block_size,
//              head_dim]; block table [batch, blocks_per_seq] of int32 block ids
//   gemm       Y [m, n] = X [m, k] * W [n, k]^T  (a linear layer: m tokens, k in, n out)
// Query head h reads KV head h / (heads / kv_heads): MHA when equal, GQA when a divisor, MQA at 1.
#pragma once

#include <cstdint>
#include <string>

namespace kvsim::kernels {

// Head dims the CUDA kernels are instantiated for.
inline constexpr bool supported_head_dim(int64_t d) { return d == 64 || d == 128; }

struct AttentionShape {
  int64_t batch = 1;
  int64_t heads = 1;
  int64_t kv_heads = 1;
  int64_t seq_q = 1;
  int64_t seq_kv = 1;
  int64_t head_dim = 64;
  // Causal masks are bottom-right aligned (as in FlashAttention-2): query i sees keys
  // j <= i + (seq_kv - seq_q), so a prefill (seq_q == seq_kv) sees j <= i.
  bool causal = false;

  int64_t group() const { return heads / kv_heads; }
  int64_t q_elements() const { return batch * heads * seq_q * head_dim; }
  int64_t kv_elements() const { return batch * kv_heads * seq_kv * head_dim; }
  // (query, key) pairs that the mask lets through, summed over batch and heads.
  int64_t visible_pairs() const;
  // Throws InputError unless every field is positive, kv_heads divides heads, head_dim is
  // supported and a causal shape has seq_q <= seq_kv.
  void validate() const;
  std::string describe() const;  // "B=2 H=8 Hkv=2 Sq=100 Skv=100 D=64 causal"
};

struct PagedDecodeShape {
  int64_t batch = 1;
  int64_t heads = 1;
  int64_t kv_heads = 1;
  int64_t head_dim = 128;
  int64_t context = 1;  // tokens of KV per sequence (all sequences equal)
  int64_t block_size = 16;

  int64_t group() const { return heads / kv_heads; }
  int64_t blocks_per_seq() const { return (context + block_size - 1) / block_size; }
  int64_t num_blocks() const { return batch * blocks_per_seq(); }
  // Elements of one of the K or V caches.
  int64_t cache_elements() const { return num_blocks() * kv_heads * block_size * head_dim; }
  void validate() const;  // block_size in [1, 256], otherwise as AttentionShape
  std::string describe() const;
};

struct GemmShape {
  int64_t m = 1;
  int64_t n = 1;
  int64_t k = 1;
  void validate() const;
  std::string describe() const;
};

}  // namespace kvsim::kernels
