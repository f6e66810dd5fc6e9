// HybridKvCoordinator's prefix cache: the keys of a request's blocks in every group (each group's
// manager keys its blocks with the group, BlockHashWithGroupId in vllm/v1/core/block_pool.py)
// and the hybrid lookup (HybridKVCacheCoordinator.find_longest_cache_hit in
// vllm/v1/core/kv_cache_coordinator.py, over each manager's find_longest_cache_hit in
// vllm/v1/core/single_type_kv_cache_manager.py).
#include <algorithm>

#include "core/check.h"
#include "models/memory/block_keys.h"
#include "models/memory/hybrid_coordinator.h"

namespace kvsim {

int64_t HybridKvCoordinator::lookup_blocks(const PrefixHashes& prefix, int64_t tokens) const {
  if (!prefix_caching_) return 0;
  // With an owner every full block has a key: the trace's hashes', then the request's own.
  return prefix.owner >= 0 ? tokens / block_tokens_
                           : keyable_prefix_blocks(prefix, tokens, block_tokens_);
}

uint64_t HybridKvCoordinator::seq_key(const PrefixHashes& prefix, int64_t i) const {
  if (i < keyable_prefix_blocks(prefix, 0, block_tokens_)) {
    return hashed_block_key(prefix, i, block_tokens_);
  }
  return own_block_key(prefix.owner, i);
}

int64_t HybridKvCoordinator::type_hit(const PrefixHashes& prefix, const std::vector<size_t>& gs,
                                      int64_t most) const {
  // vLLM's get_cached_block(hash, group_ids): a block index hits only when every group of the
  // type has it cached; the type's manager applies its kind's rule.
  const auto all_cached = [&](int64_t i) {
    const uint64_t key = seq_key(prefix, i);
    return std::all_of(gs.begin(), gs.end(), [&](size_t g) { return managers_[g].cached(key); });
  };
  return managers_[gs.front()].longest_cache_hit(all_cached, most);
}

int64_t HybridKvCoordinator::hit_blocks(const PrefixHashes& prefix, int64_t tokens) const {
  // At most (tokens - 1) / block_tokens blocks: the last token is always computed.
  int64_t hit = std::min(lookup_blocks(prefix, tokens), (tokens - 1) / block_tokens_);
  if (hit <= 0) return 0;
  // The fixed point: each type accepts the candidate or shortens it; a shortening starts the
  // checks over (full attention first).
  while (true) {
    int64_t cur = hit;
    for (const std::vector<size_t>& gs : types_) cur = type_hit(prefix, gs, cur);
    if (cur >= hit) return hit;
    hit = cur;
  }
}

int64_t HybridKvCoordinator::cached_prefix_tokens(const PrefixHashes& prefix,
                                                  int64_t tokens) const {
  return hit_blocks(prefix, tokens) * block_tokens_;
}

void HybridKvCoordinator::key_full_blocks(Req& r) {
  if (!prefix_caching_) return;
  const auto own = static_cast<int64_t>(r.keys.size()) * block_tokens_;
  const int64_t keyable = r.owner >= 0 ? r.tokens : std::min(r.tokens, own);
  for (auto i = static_cast<int64_t>(r.keyed); i < keyable / block_tokens_; ++i) {
    const uint64_t key = i < static_cast<int64_t>(r.keys.size()) ? r.keys[static_cast<size_t>(i)]
                                                                 : own_block_key(r.owner, i);
    for (size_t g = 0; g < managers_.size(); ++g) {
      managers_[g].cache_block(r.tables[g], static_cast<size_t>(i), key);
    }
    r.keyed = static_cast<size_t>(i) + 1;
  }
}

void HybridKvCoordinator::uncache_past(RequestId request, int64_t tokens) {
  Req& r = closed_req(request, "uncache_past");
  if (!prefix_caching_) return;
  // Only its own keys past the trace's hashes, newest first, while no one else holds them.
  const size_t own_from = std::max(static_cast<size_t>(tokens / block_tokens_), r.keys.size());
  while (r.keyed > own_from) {
    const size_t i = r.keyed - 1;
    bool shared = false;
    for (size_t g = 0; g < managers_.size(); ++g) {
      shared = shared || managers_[g].shared(r.tables[g], i);
    }
    if (shared) break;
    for (size_t g = 0; g < managers_.size(); ++g) managers_[g].uncache_block(r.tables[g], i);
    r.keyed = i;
  }
}

}  // namespace kvsim
