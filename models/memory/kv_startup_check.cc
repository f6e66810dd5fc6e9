#include "models/memory/kv_startup_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/units.h"

namespace kvsim {

namespace {

// One group's pages for a request of `len` tokens (the group's spec.max_memory_usage_bytes /
// page_size in vllm/v1/kv_cache_interface.py: FullAttentionSpec, SlidingWindowSpec,
// ChunkedLocalAttentionSpec): the admission cap, or every block under full attention.
int64_t group_blocks(const KvGroup& g, int64_t len, int64_t block, int64_t batched) {
  return kv_group_admission_cap(g, len, block, batched).value_or((len + block - 1) / block);
}

}  // namespace

int64_t kv_blocks_for_one_request(const KvGroupLayout& layout, const KvRequestLimits& limits) {
  int64_t blocks = 0;
  for (const KvGroup& g : layout.groups) {
    blocks +=
        group_blocks(g, limits.max_model_len, limits.block_tokens, limits.max_num_batched_tokens);
  }
  return blocks;
}

int64_t kv_bytes_for_one_request(const KvGroupLayout& layout, const KvRequestLimits& limits) {
  // Saturates: a length past what int64 bytes can count needs more than any pool holds.
  return checked_mul(kv_blocks_for_one_request(layout, limits),
                     layout.block_bytes(limits.block_tokens))
      .value_or(std::numeric_limits<int64_t>::max());
}

int64_t estimate_max_model_len(const KvGroupLayout& layout, const KvRequestLimits& limits,
                               int64_t available_bytes) {
  const auto fits = [&](int64_t len) {
    KvRequestLimits l = limits;
    l.max_model_len = len;
    return kv_bytes_for_one_request(layout, l) <= available_bytes;
  };
  if (!fits(1)) return 0;
  int64_t left = 1, right = limits.max_model_len, result = 1;
  while (left <= right) {
    const int64_t mid = left + (right - left) / 2;
    if (fits(mid)) {
      result = mid;
      left = mid + 1;
    } else {
      right = mid - 1;
    }
  }
  return result;
}

int64_t vllm_kv_cache_size_tokens(const KvGroupLayout& layout, const KvRequestLimits& limits,
                                  int64_t pool_blocks) {
  const int64_t per_request = kv_blocks_for_one_request(layout, limits);
  if (per_request <= 0) return 0;
  // pool_blocks x max_model_len can pass int64 for a huge length: the quotient cannot.
  // (__extension__: -Wpedantic knows no 128-bit integer type.)
  __extension__ using Wide = __int128;
  return static_cast<int64_t>(static_cast<Wide>(pool_blocks) * limits.max_model_len / per_request);
}

std::optional<std::string> one_request_fits_error(const KvGroupLayout& layout,
                                                  const KvRequestLimits& limits,
                                                  int64_t available_bytes) {
  const int64_t needed = kv_bytes_for_one_request(layout, limits);
  if (needed <= available_bytes) return std::nullopt;
  const int64_t estimate = estimate_max_model_len(layout, limits, available_bytes);
  const std::string hint = estimate > 0
                               ? fmt::format(
                                     "; based on the available memory the estimated maximum "
                                     "model length is {}",
                                     estimate)
                               : "";
  return fmt::format(
      "max_model_len {} needs {:.2f} GiB of KV cache for one request, more than the {:.2f} GiB "
      "available for KV cache: vLLM refuses to start (_check_enough_kv_cache_memory){}; raise "
      "gpu_memory_utilization or lower max_model_len",
      limits.max_model_len, to_gib(needed), to_gib(available_bytes), hint);
}

}  // namespace kvsim
