// How vLLM's hybrid KV cache manager groups a model's attention layers, and what that makes of
// the pool (docs/models.md "Hybrid KV"). Layers of one attention type (full, a sliding window, a
// chunk) share a block table; each type is cut into groups of the same number of layers
// (vllm/v1/core/kv_cache_utils.py, _get_kv_cache_groups_uniform_page_size: the group size is the
// smallest type's layer count, or the largest's when that is under 1.5 times the smallest; the
// last group of a type is padded). A block id of the one shared pool addresses one page in each
// of group_size tensors, so a block is group_size layers' worth of block_size tokens, and the
// pool holds available / (page_size x group_size) blocks (get_kv_cache_config_from_groups,
// get_num_blocks).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/model_spec.h"

namespace kvsim {

struct KvGroup {
  enum class Kind { kFull, kSlidingWindow, kChunked };
  Kind kind = Kind::kFull;
  int64_t span = 0;         // the window or chunk in tokens; 0 for full attention
  std::vector<int> layers;  // the model's layers in the group (fewer than group_size if padded)
};

struct KvGroupLayout {
  std::vector<KvGroup> groups;
  int group_size = 0;                 // layers per group, padding included
  int64_t layer_bytes_per_token = 0;  // one layer's K and V of one token (one page / block_size)

  // One block: group_size layers of `block_tokens` tokens.
  int64_t block_bytes(int64_t block_tokens) const {
    return int64_t{group_size} * block_tokens * layer_bytes_per_token;
  }
  // A token's KV in group g (its real layers; the padding holds nothing).
  int64_t group_bytes_per_token(size_t g) const {
    return static_cast<int64_t>(groups[g].layers.size()) * layer_bytes_per_token;
  }
  int padding_layers() const;
  // Blocks the pool holds in `kv_bytes` (vLLM: available // page_size // group_size).
  int64_t pool_blocks(int64_t kv_bytes, int64_t block_tokens) const {
    return kv_bytes / block_bytes(block_tokens);
  }
};

// The layout of a model as one GPU holds it (pass the gpu_share: its kv_heads and layers).
// Without local layers: one full-attention group of every layer (vLLM's uniform case).
KvGroupLayout kv_group_layout(const ModelSpec& m);

// Blocks a sequence of `tokens` tokens, all computed, holds in group g (blocks before the window
// or chunk of the next query are freed): the block table's length less its freed front.
int64_t kv_group_blocks_held(const KvGroup& g, int64_t tokens, int64_t block_tokens);
// Of a `computed`-token sequence, the leading blocks vLLM frees (remove_skipped_blocks in
// vllm/v1/core/single_type_kv_cache_manager.py): sliding window, tokens before computed - window
// + 1; chunked, tokens before the current chunk's start; full attention, none.
int64_t kv_group_skipped_blocks(const KvGroup& g, int64_t computed, int64_t block_tokens);
// vLLM's max_admission_blocks_per_request (vllm/v1/kv_cache_interface.py: SlidingWindowSpec,
// ChunkedLocalAttentionSpec): the most blocks group g holds at once for a request of up to
// `max_len` tokens when a step computes at most `batched` tokens, because remove_skipped_blocks
// frees what left the window or chunk before each step allocates. A window W holds its last W - 1
// computed tokens and the step's: ceil(min(W - 1 + batched, max_len) / block) + 1 (the window may
// start inside a block); a chunk C, ceil(min(C + batched, max_len) / block). Full attention holds
// every block: no cap (nullopt). vLLM sizes the pool at start-up and gates admission by this one
// number.
std::optional<int64_t> kv_group_admission_cap(const KvGroup& g, int64_t max_len,
                                              int64_t block_tokens, int64_t batched);
// The blocks vLLM's full-sequence admission gate asks of group g for a `tokens`-token sequence,
// nothing computed: its table, capped (get_num_blocks_to_allocate with apply_admission_cap=True in
// vllm/v1/core/single_type_kv_cache_manager.py).
int64_t kv_group_admission_blocks(const KvGroup& g, int64_t tokens, int64_t block_tokens,
                                  int64_t batched);
// "full", "sliding window 128", "chunked 8192".
std::string kv_group_name(const KvGroup& g);

}  // namespace kvsim
