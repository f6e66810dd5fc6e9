// PagedStore's prefix-key index with duplicate copies: vLLM's BlockHashToBlockMap
// (vllm/v1/core/block_pool.py: insert appends a block to its hash's blocks, get_one_block returns
// the first inserted still cached, pop removes one and keeps the rest in order).
#include "core/check.h"
#include "models/memory/paged_store.h"

namespace kvsim {

void PagedStore::index_key(int32_t b, uint64_t key) {
  blk(b).key = key;
  blk(b).dup_next = -1;
  auto [it, fresh] = by_key_.try_emplace(key, b);
  if (fresh) {
    if (events_) events_({.key = key, .block_tokens = block_tokens_});
    return;
  }
  int32_t last = it->second;
  while (blk(last).dup_next >= 0) last = blk(last).dup_next;
  blk(last).dup_next = b;
}

void PagedStore::unindex_key(int32_t b) {
  const uint64_t key = blk(b).key;
  auto it = by_key_.find(key);
  KVSIM_CHECK(it != by_key_.end(), "block {} carries key {} that no index entry has", b, key);
  if (it->second == b) {
    if (blk(b).dup_next >= 0) {
      it->second = blk(b).dup_next;
    } else {
      by_key_.erase(it);
      if (events_) events_({.removed = true, .key = key, .block_tokens = block_tokens_});
    }
  } else {
    int32_t prev = it->second;
    while (blk(prev).dup_next != b) {
      prev = blk(prev).dup_next;
      KVSIM_CHECK(prev >= 0, "block {} is not among its key's copies", b);
    }
    blk(prev).dup_next = blk(b).dup_next;
  }
  blk(b).key = 0;
  blk(b).dup_next = -1;
}

}  // namespace kvsim
