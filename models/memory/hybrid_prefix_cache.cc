// HybridKvCoordinator's block pool and prefix cache: the free list (vLLM's FreeKVCacheBlockQueue:
// freed blocks to the back, allocation from the front, a hit taken out of the middle), the
// group-keyed index (BlockHashToBlockMap over BlockHashWithGroupId in vllm/v1/core/block_pool.py)
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

uint64_t HybridKvCoordinator::group_key(uint64_t key, size_t g) {
  return mix_block_key(key, static_cast<int64_t>(g) + (int64_t{1} << 40));
}

int32_t HybridKvCoordinator::hit_block(const PrefixHashes& prefix, size_t g, int64_t i) const {
  return pool_.cached_block(group_key(seq_key(prefix, i), g));
}

int64_t HybridKvCoordinator::type_hit(const PrefixHashes& prefix, const std::vector<size_t>& gs,
                                      int64_t most) const {
  // vLLM's get_cached_block(hash, group_ids): a block index hits only when every group of the
  // type has it cached.
  const auto all_cached = [&](int64_t i) {
    const uint64_t key = seq_key(prefix, i);
    return std::all_of(gs.begin(), gs.end(), [&](size_t g) { return cached(group_key(key, g)); });
  };
  const KvGroup& g = layout_.groups[gs.front()];
  switch (g.kind) {
    case KvGroup::Kind::kFull:
    case KvGroup::Kind::kChunked: {
      // Left to right, stopping at the first miss. A chunked group counts the blocks before the
      // chunk of the hit's end as hits without a lookup (ChunkedLocalAttentionManager: null
      // blocks), and looks up only those inside that chunk.
      int64_t n = g.kind == KvGroup::Kind::kChunked
                      ? most * block_tokens_ / g.span * g.span / block_tokens_
                      : 0;
      while (n < most && all_cached(n)) ++n;
      return n;
    }
    case KvGroup::Kind::kSlidingWindow: {
      // Right to left for ceil((W - 1) / block) contiguous cached blocks (SlidingWindowManager);
      // found, the hit ends with them; else it is the leading run from block 0.
      const int64_t run_needed = (g.span - 1 + block_tokens_ - 1) / block_tokens_;
      int64_t run = 0;
      for (int64_t i = most - 1; i >= 0; --i) {
        if (!all_cached(i)) {
          run = 0;
          continue;
        }
        if (++run >= run_needed) return i + run;
      }
      return run;
    }
  }
  return 0;
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
    for (size_t g = 0; g < layout_.groups.size(); ++g) {
      const int32_t b = r.tables[g][static_cast<size_t>(i)];
      if (b >= 0) pool_.index_key(b, group_key(key, g));  // a freed block was never full and kept
    }
    r.keyed = static_cast<size_t>(i) + 1;
  }
}

void HybridKvCoordinator::uncache_past(RequestId request, int64_t tokens) {
  auto it = reqs_.find(request);
  KVSIM_CHECK(it != reqs_.end(), "uncache_past: request {} holds no KV", request);
  Req& r = it->second;
  if (!prefix_caching_) return;
  // Only its own keys past the trace's hashes, newest first, while no one else holds them.
  const size_t own_from = std::max(static_cast<size_t>(tokens / block_tokens_), r.keys.size());
  while (r.keyed > own_from) {
    const size_t i = r.keyed - 1;
    bool shared = false;
    for (size_t g = 0; g < layout_.groups.size(); ++g) {
      const int32_t b = r.tables[g][i];
      shared = shared || (b >= 0 && pool_.block(b).ref != 1);
    }
    if (shared) break;
    for (size_t g = 0; g < layout_.groups.size(); ++g) {
      if (r.tables[g][i] >= 0) pool_.unindex_key(r.tables[g][i]);
    }
    r.keyed = i;
  }
}

int32_t HybridKvCoordinator::pop_free(size_t g) {
  const int32_t b = pool_.pop_free();  // one holder, empty
  pool_.block(b).group = static_cast<int32_t>(g);
  ++group_held_[g];
  return b;
}

void HybridKvCoordinator::touch(int32_t b) {
  if (!pool_.take(b)) return;
  const BlockPool::Block& k = pool_.block(b);
  live_bytes_ += k.filled * layout_.group_bytes_per_token(static_cast<size_t>(k.group));
  ++group_held_[static_cast<size_t>(k.group)];
}

void HybridKvCoordinator::unref(int32_t b) {
  if (!pool_.unref(b)) return;
  // Its tokens stay in the record while it is cached: a hit makes them live again.
  const BlockPool::Block& k = pool_.block(b);
  live_bytes_ -= k.filled * layout_.group_bytes_per_token(static_cast<size_t>(k.group));
  --group_held_[static_cast<size_t>(k.group)];
}

void HybridKvCoordinator::set_filled(int32_t b, int64_t tokens) {
  BlockPool::Block& k = pool_.block(b);
  live_bytes_ += (tokens - k.filled) * layout_.group_bytes_per_token(static_cast<size_t>(k.group));
  k.filled = static_cast<int32_t>(tokens);
}

void HybridKvCoordinator::check_blocks() const {
  pool_.check_invariants();
  int64_t live = 0;
  std::vector<int64_t> per_group(layout_.groups.size(), 0);
  for (int32_t b = 0; b < static_cast<int32_t>(num_blocks_); ++b) {
    const BlockPool::Block& k = pool_.block(b);
    if (k.ref == 0) continue;
    live += k.filled * layout_.group_bytes_per_token(static_cast<size_t>(k.group));
    ++per_group[static_cast<size_t>(k.group)];
  }
  KVSIM_CHECK(live == live_bytes_, "live {} vs {}", live, live_bytes_);
  KVSIM_CHECK(per_group == group_held_, "per-group held blocks disagree");
}

}  // namespace kvsim
