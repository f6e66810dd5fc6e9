// vLLM's start-up check that the paged KV pool holds one request of max_model_len, and its hint
// (the longest max_model_len that would fit). vLLM refuses to start otherwise
// (vllm/v1/core/kv_cache_utils.py: get_kv_cache_configs calls _check_enough_kv_cache_memory with
// _max_memory_usage_bytes_from_groups and, for its hint, _estimate_max_model_len_from_groups).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "models/memory/kv_groups.h"

namespace kvsim {

struct KvRequestLimits {
  int64_t block_tokens = 16;
  int64_t max_model_len = 0;
  // A window's or chunk's blocks also cover one step's newly scheduled tokens.
  int64_t max_num_batched_tokens = 0;
};

// Blocks one request of max_model_len tokens can hold at once, summed over the groups (vLLM's
// blocks_needed: each group's spec.max_memory_usage_bytes in pages). Full attention:
// ceil(len / block); a sliding window W: ceil(min(W - 1 + batched, len) / block) + 1 (the window
// need not start at a block boundary); a chunk C: ceil(min(C + batched, len) / block).
int64_t kv_blocks_for_one_request(const KvGroupLayout& layout, const KvRequestLimits& limits);

// Those blocks in bytes (each block is group_size layers' pages).
int64_t kv_bytes_for_one_request(const KvGroupLayout& layout, const KvRequestLimits& limits);

// The longest max_model_len in [1, limits.max_model_len] whose one request fits `available_bytes`
// (vLLM's binary search); 0 when not even one token fits.
int64_t estimate_max_model_len(const KvGroupLayout& layout, const KvRequestLimits& limits,
                               int64_t available_bytes);

// What vLLM logs as "GPU KV cache size: N tokens" for a pool of `pool_blocks` blocks (its
// num_blocks, the null block included): max_model_len times its maximum concurrency, pool_blocks
// over the blocks one max_model_len request holds (get_kv_cache_capacity,
// get_max_concurrency_for_kv_cache_config), floored. For a hybrid model it is fewer tokens than
// the pool's pages hold for one group: the groups draw their blocks from the same pool.
int64_t vllm_kv_cache_size_tokens(const KvGroupLayout& layout, const KvRequestLimits& limits,
                                  int64_t pool_blocks);

// vLLM's refusal, or nothing when one request fits: "max_model_len 131072 needs 16.00 GiB of KV
// cache for one request, more than the 3.62 GiB available ...".
std::optional<std::string> one_request_fits_error(const KvGroupLayout& layout,
                                                  const KvRequestLimits& limits,
                                                  int64_t available_bytes);

}  // namespace kvsim
