#include "models/memory/kv_group_manager.h"

#include <algorithm>
#include <limits>

#include "core/check.h"
#include "models/memory/block_keys.h"

namespace kvsim {

KvGroupManager::KvGroupManager(KvGroup spec, size_t id, int64_t block_tokens,
                               int64_t bytes_per_token, BlockPool& pool)
    : spec_(std::move(spec)),
      id_(static_cast<int32_t>(id)),
      block_tokens_(block_tokens),
      bytes_per_token_(bytes_per_token),
      pool_(pool) {
  KVSIM_CHECK(block_tokens >= 1 && pool.block_ids(), "KV group manager: block_tokens {}",
              block_tokens);
}

uint64_t KvGroupManager::group_key(uint64_t seq_key) const {
  return mix_block_key(seq_key, int64_t{id_} + (int64_t{1} << 40));
}

int64_t KvGroupManager::longest_cache_hit(const std::function<bool(int64_t)>& all_cached,
                                          int64_t most) const {
  switch (spec_.kind) {
    case KvGroup::Kind::kFull:
    case KvGroup::Kind::kChunked: {
      // Left to right, stopping at the first miss. A chunked group counts the blocks before the
      // chunk of the hit's end as hits without a lookup (ChunkedLocalAttentionManager: null
      // blocks), and looks up only those inside that chunk.
      int64_t n = spec_.kind == KvGroup::Kind::kChunked
                      ? most * block_tokens_ / spec_.span * spec_.span / block_tokens_
                      : 0;
      while (n < most && all_cached(n)) ++n;
      return n;
    }
    case KvGroup::Kind::kSlidingWindow: {
      // Right to left for ceil((W - 1) / block) contiguous cached blocks (SlidingWindowManager);
      // found, the hit ends with them; else it is the leading run from block 0.
      const int64_t run_needed = (spec_.span - 1 + block_tokens_ - 1) / block_tokens_;
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

int64_t KvGroupManager::frees(const Table& t, int64_t computed) const {
  const int64_t want = skipped_blocks(computed);
  const auto table = static_cast<int64_t>(t.blocks.size());
  return std::max<int64_t>(0, std::min(want, table) - t.skipped);
}

int64_t KvGroupManager::frees_to_pool(const Table& t, int64_t computed) const {
  const int64_t n = frees(t, computed);
  int64_t back = 0;
  for (int64_t i = t.skipped; i < t.skipped + n; ++i) {
    back += pool_.block(t.blocks[static_cast<size_t>(i)]).ref == 1;
  }
  return back;
}

int64_t KvGroupManager::remove_skipped_blocks(Table& t, int64_t computed) {
  const int64_t n = frees(t, computed);
  for (int64_t i = t.skipped + n - 1; i >= t.skipped; --i) {
    int32_t& b = t.blocks[static_cast<size_t>(i)];
    unref(b);
    b = -1;
  }
  t.skipped += n;
  return n;
}

int64_t KvGroupManager::next_free_at(const Table& t) const {
  // Block t.skipped is freed once skipped_blocks(computed) > t.skipped (and it is in the table).
  const int64_t next = t.skipped + 1;
  if (next > static_cast<int64_t>(t.blocks.size())) return std::numeric_limits<int64_t>::max();
  switch (spec_.kind) {
    case KvGroup::Kind::kFull: break;
    case KvGroup::Kind::kSlidingWindow:  // (computed - W + 1) / block >= next
      return next * block_tokens_ + spec_.span - 1;
    case KvGroup::Kind::kChunked:  // computed / C x C >= next x block: the chunk after that
      return (next * block_tokens_ + spec_.span - 1) / spec_.span * spec_.span;
  }
  return std::numeric_limits<int64_t>::max();
}

int64_t KvGroupManager::blocks_to_allocate(const std::function<uint64_t(int64_t)>& seq_keys,
                                           int64_t hits, int64_t table) const {
  // vLLM: max(required - max(skipped, hits), 0), and the evictable hits. The skipped ones are
  // never touched.
  const int64_t skipped = std::min(hits, skipped_blocks(hits * block_tokens_));
  int64_t evictable = 0;
  for (int64_t i = skipped; i < hits; ++i) {
    evictable += pool_.block(cached_block(seq_keys(i))).ref == 0;
  }
  return std::max<int64_t>(0, table - hits) + evictable;
}

void KvGroupManager::share_hits(Table& t, const std::function<uint64_t(int64_t)>& seq_keys,
                                int64_t hits) {
  t.skipped = std::min(hits, skipped_blocks(hits * block_tokens_));
  t.blocks.assign(static_cast<size_t>(t.skipped), -1);
  for (int64_t i = t.skipped; i < hits; ++i) {
    const int32_t b = cached_block(seq_keys(i));
    KVSIM_CHECK(b >= 0, "group {}: hit block {} is not cached", id_, i);
    touch(b);
    t.blocks.push_back(b);
  }
}

void KvGroupManager::allocate_new_blocks(Table& t, int64_t tokens) { fill_to(t, tokens, nullptr); }

void KvGroupManager::take_blocks(int64_t n, std::vector<int32_t>& taken) {
  for (int64_t i = 0; i < n; ++i) taken.push_back(pop_free());
}

void KvGroupManager::adopt_blocks(Table& t, int64_t tokens, std::vector<int32_t>& taken) {
  fill_to(t, tokens, &taken);
}

void KvGroupManager::fill_to(Table& t, int64_t tokens, std::vector<int32_t>* taken) {
  std::vector<int32_t>& blocks = t.blocks;
  if (!blocks.empty() && blocks.back() >= 0) {  // its last block's room fills first
    const auto last = static_cast<int64_t>(blocks.size()) - 1;
    set_filled(blocks.back(), std::min(block_tokens_, tokens - last * block_tokens_));
  }
  const int64_t want = (tokens + block_tokens_ - 1) / block_tokens_;
  for (auto i = static_cast<int64_t>(blocks.size()); i < want; ++i) {
    int32_t b = -1;
    if (taken == nullptr) {
      b = pop_free();
    } else {
      KVSIM_CHECK(!taken->empty(), "group {}: a settle adopts more blocks than were crossed", id_);
      b = taken->back();
      taken->pop_back();
    }
    set_filled(b, std::min(block_tokens_, tokens - i * block_tokens_));
    blocks.push_back(b);
  }
}

void KvGroupManager::free(const Table& t) {
  for (auto b = t.blocks.rbegin(); b != t.blocks.rend() && *b >= 0; ++b) unref(*b);
}

void KvGroupManager::cache_block(const Table& t, size_t i, uint64_t seq_key) {
  const int32_t b = t.blocks[i];
  if (b >= 0) pool_.index_key(b, group_key(seq_key));  // a freed block was never full and kept
}

bool KvGroupManager::shared(const Table& t, size_t i) const {
  const int32_t b = t.blocks[i];
  return b >= 0 && pool_.block(b).ref != 1;
}

void KvGroupManager::uncache_block(const Table& t, size_t i) {
  if (t.blocks[i] >= 0) pool_.unindex_key(t.blocks[i]);
}

int32_t KvGroupManager::pop_free() {
  const int32_t b = pool_.pop_free();  // one holder, empty
  pool_.block(b).group = id_;
  ++held_;
  return b;
}

void KvGroupManager::touch(int32_t b) {
  if (!pool_.take(b)) return;
  live_tokens_ += pool_.block(b).filled;
  ++held_;
}

void KvGroupManager::unref(int32_t b) {
  if (!pool_.unref(b)) return;
  // Its tokens stay in the record while it is cached: a hit makes them live again.
  live_tokens_ -= pool_.block(b).filled;
  --held_;
}

void KvGroupManager::set_filled(int32_t b, int64_t tokens) {
  BlockPool::Block& k = pool_.block(b);
  live_tokens_ += tokens - k.filled;
  k.filled = static_cast<int32_t>(tokens);
}

void KvGroupManager::check_table(const Table& t, int64_t tokens,
                                 std::vector<int32_t>& holders) const {
  KVSIM_CHECK(t.skipped <= skipped_blocks(tokens), "group {}: {} blocks freed inside its window",
              id_, t.skipped);
  for (size_t i = 0; i < t.blocks.size(); ++i) {
    const int32_t b = t.blocks[i];
    const bool freed = static_cast<int64_t>(i) < t.skipped;
    KVSIM_CHECK(freed == (b < 0), "group {}: entry {} is {}", id_, i, b);
    if (b < 0) continue;
    ++holders[static_cast<size_t>(b)];
    KVSIM_CHECK(pool_.block(b).group == id_, "block {} of group {} in group {}'s table", b,
                pool_.block(b).group, id_);
  }
}

void KvGroupManager::check_counts() const {
  int64_t held = 0, live = 0;
  for (int32_t b = 0; b < static_cast<int32_t>(pool_.num_blocks()); ++b) {
    const BlockPool::Block& k = pool_.block(b);
    if (k.ref == 0 || k.group != id_) continue;
    ++held;
    live += k.filled;
  }
  KVSIM_CHECK(held == held_ && live == live_tokens_, "group {}: {} blocks, {} live, counted {}, {}",
              id_, held, live, held_, live_tokens_);
}

}  // namespace kvsim
