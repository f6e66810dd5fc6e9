// The replay's real paged KV pool: num_blocks blocks of block_tokens tokens, each holding K and V
// of every layer and KV head (float32), allocated once, a free list, and per request a block
// table grown as its KV grows (vLLM's KV cache manager hands blocks out the same way:
// vllm/v1/core/kv_cache_manager.py). Layout per layer and per K/V, as vLLM's paged-attention
// kernels read it: [num_blocks, kv_heads, block_tokens, head_dim].
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "models/model_spec.h"

namespace kvsim::validate {

inline constexpr int64_t kMaxCpuPoolBytes = int64_t{8} << 30;  // 8 GiB

class PagedKvPool {
 public:
  // Throws InputError when the pool would exceed kMaxCpuPoolBytes (saying how many bytes were
  // asked). The free list starts in an order shuffled by `seed`, so a sequence's logical blocks
  // are scattered over memory from the first allocation on.
  PagedKvPool(const ModelSpec& m, int block_tokens, int64_t num_blocks, uint64_t seed);

  static int64_t bytes_for(const ModelSpec& m, int block_tokens, int64_t num_blocks);

  // Grows request `id`'s block table to hold `tokens` tokens. Throws InvariantError naming the
  // request when the free list runs dry (the engine's store and this pool disagree).
  void reserve(int64_t id, int64_t tokens);
  void release(int64_t id);
  void release_all();

  // Positions [0, filled(id)) of the request hold KV values (computed or filled in).
  int64_t filled(int64_t id) const;
  void set_filled(int64_t id, int64_t tokens);

  std::span<const int32_t> block_table(int64_t id) const;
  int64_t blocks_in_use() const { return num_blocks_ - static_cast<int64_t>(free_.size()); }
  int64_t num_blocks() const { return num_blocks_; }
  int block_tokens() const { return block_tokens_; }

  // The head_dim floats of K (or V) of `layer`, KV head `kv_head`, at the request's `position`
  // through its block table. Requires: position < the tokens reserved.
  float* k_at(int layer, std::span<const int32_t> table, int64_t position, int kv_head);
  float* v_at(int layer, std::span<const int32_t> table, int64_t position, int kv_head);
  // Layer `layer`'s K (or V) blocks, [num_blocks, kv_heads, block_tokens, head_dim].
  const float* k_layer(int layer) const { return &k_[offset(layer, 0, 0, 0)]; }
  const float* v_layer(int layer) const { return &v_[offset(layer, 0, 0, 0)]; }
  // The [block_tokens, head_dim] run of one block for one KV head.
  const float* k_block(int layer, int32_t block, int kv_head) const;
  const float* v_block(int layer, int32_t block, int kv_head) const;

 private:
  size_t offset(int layer, int32_t block, int kv_head, int64_t slot) const;

  struct Entry {
    std::vector<int32_t> blocks;
    int64_t filled = 0;
  };
  int layers_;
  int kv_heads_;
  int head_dim_;
  int block_tokens_;
  int64_t num_blocks_;
  std::vector<float> k_;
  std::vector<float> v_;
  std::vector<int32_t> free_;  // a stack: the back is handed out next
  std::unordered_map<int64_t, Entry> seqs_;
};

}  // namespace kvsim::validate
