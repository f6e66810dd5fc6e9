#include "models/memory/paged_store.h"

#include <cstddef>
#include <limits>

#include "core/units.h"

#include <algorithm>

#include "core/check.h"
#include "models/memory/block_keys.h"

namespace kvsim {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

PagedStore::PagedStore(int64_t kv_bytes_per_token, PagedStoreOptions options)
    : bytes_per_token_(kv_bytes_per_token),
      block_tokens_(options.block_tokens),
      num_blocks_(options.num_blocks),
      block_bytes_(kv_bytes_per_token * options.block_tokens),
      prefix_caching_(options.enable_prefix_caching),
      sliding_window_(options.sliding_window),
      // Block ids only with prefix caching (see the header).
      pool_(options.num_blocks, options.enable_prefix_caching) {
  KVSIM_CHECK(kv_bytes_per_token >= 1 && block_tokens_ >= 1 && num_blocks_ >= 1 &&
                  num_blocks_ < (int64_t{1} << 31),
              "bad paged store: {} bytes/token, {} tokens/block, {} blocks", kv_bytes_per_token,
              block_tokens_, num_blocks_);
  KVSIM_CHECK(sliding_window_ >= 0, "bad paged store: sliding window {}", sliding_window_);
}

PagedStore::PagedStore(KvGroupLayout layout, int64_t block_tokens, int64_t num_blocks,
                       bool prefix_caching)
    : bytes_per_token_(0),
      block_tokens_(block_tokens),
      num_blocks_(num_blocks),
      block_bytes_(layout.block_bytes(block_tokens)),
      prefix_caching_(prefix_caching),
      sliding_window_(0),
      // Group managers keep tables of block ids; without prefix caching no figure depends on
      // which ids, so the free blocks need not keep vLLM's order (BlockPool::FreeOrder::kAny).
      pool_(num_blocks, /*block_ids=*/true,
            prefix_caching ? BlockPool::FreeOrder::kQueue : BlockPool::FreeOrder::kAny),
      groups_(std::make_unique<HybridKvCoordinator>(std::move(layout), block_tokens, pool_,
                                                    prefix_caching)) {
  bytes_per_token_ = groups_->kv_bytes_per_token();
}

// Bytes a failed request wanted, for its report: a request longer than any pool (a billion
// tokens of a huge model) must not overflow while saying so.
static int64_t saturating_bytes(int64_t blocks, int64_t block_bytes) {
  return checked_mul(blocks, block_bytes).value_or(std::numeric_limits<int64_t>::max());
}

AllocResult PagedStore::capacity_failure(int64_t blocks) const {
  const int64_t free = free_blocks();
  return AllocResult::failure(OomReason::kCapacity, saturating_bytes(blocks, block_bytes_),
                              free * block_bytes_, free > 0 ? block_bytes_ : 0);
}

void PagedStore::unref(int32_t b) {
  if (pool_.unref(b)) {
    live_tokens_ -= blk(b).filled;
    blk(b).filled = 0;
  }
}

int64_t PagedStore::keyable_blocks(const PrefixHashes& prefix, int64_t limit) const {
  return prefix_caching_ ? keyable_prefix_blocks(prefix, limit, block_tokens_) : 0;
}

int64_t PagedStore::owner_of(const PrefixHashes& prefix) const {
  // (Not with a sliding window: its blocks leave from the front before they would be keyed.)
  return prefix_caching_ && sliding_window_ == 0 ? prefix.owner : -1;
}

int64_t PagedStore::lookup_blocks(const PrefixHashes& prefix, int64_t tokens) const {
  return owner_of(prefix) >= 0 ? tokens / block_tokens_ : keyable_blocks(prefix, tokens);
}

uint64_t PagedStore::own_key(int64_t owner, int64_t i) { return own_block_key(owner, i); }

uint64_t PagedStore::key_of(const PrefixHashes& prefix, int64_t i) const {
  if (i >= keyable_blocks(prefix, 0) && owner_of(prefix) >= 0) return own_key(prefix.owner, i);
  return hashed_block_key(prefix, i, block_tokens_);
}

int64_t PagedStore::cached_prefix_tokens(const PrefixHashes& prefix, int64_t tokens) const {
  if (groups_) return groups_->cached_prefix_tokens(prefix, tokens);
  // At most (tokens - 1) / block_tokens blocks: at least the last token is computed, and the
  // blocks stay whole (vLLM v1: max_cache_hit_length = num_tokens - 1, in whole blocks).
  const int64_t most = std::min(lookup_blocks(prefix, tokens), (tokens - 1) / block_tokens_);
  int64_t n = 0;
  while (n < most && pool_.cached(key_of(prefix, n))) ++n;  // a prefix, not a set
  return n * block_tokens_;
}

int64_t PagedStore::blocks_to_allocate(const PrefixHashes& prefix, int64_t tokens) const {
  if (groups_) return groups_->blocks_to_allocate(prefix, tokens);
  int64_t need = ceil_div(tokens, block_tokens_);
  if (!prefix_caching_) return need;
  const int64_t hits = cached_prefix_tokens(prefix, tokens) / block_tokens_;
  for (int64_t i = 0; i < hits; ++i) {
    if (blk(pool_.cached_block(key_of(prefix, i))).ref > 0) --need;  // shared: no free block taken
  }
  return need;
}

int64_t PagedStore::admission_blocks(const PrefixHashes& prefix, int64_t tokens,
                                     int64_t batched) const {
  if (groups_) return groups_->admission_blocks(prefix, tokens, batched);
  const int64_t need = blocks_to_allocate(prefix, tokens);
  if (sliding_window_ == 0) return need;
  return std::min(need, *kv_group_admission_cap(window_group(), tokens, block_tokens_, batched));
}

void PagedStore::key_full_blocks(const Req& r, BlockTable& t) {
  const int64_t keyable =
      t.owner >= 0 ? r.tokens : static_cast<int64_t>(t.keys.size()) * block_tokens_;
  const auto full = static_cast<size_t>(std::min(keyable, r.tokens) / block_tokens_);
  // Keying follows the tokens and skipping lags them, so no freed block is ever keyed here.
  KVSIM_CHECK(t.keyed >= full || static_cast<int64_t>(t.keyed) >= r.skipped,
              "keying block {} of a request that freed {}", t.keyed, r.skipped);
  for (; t.keyed < full; ++t.keyed) {
    const int32_t b = t.blocks[t.keyed - static_cast<size_t>(r.skipped)];
    const uint64_t key =
        t.keyed < t.keys.size() ? t.keys[t.keyed] : own_key(t.owner, static_cast<int64_t>(t.keyed));
    pool_.index_key(b, key);
  }
}

void PagedStore::uncache_past(RequestId request, int64_t tokens) {
  if (groups_) return groups_->uncache_past(request, tokens);
  Req& r = held(request, "uncache_past");
  if (!prefix_caching_) return;
  BlockTable& t = table(r);
  const auto keep = static_cast<size_t>(std::max<int64_t>(tokens / block_tokens_, r.skipped));
  const size_t own_from = std::max(keep, t.keys.size());  // trace-hash keys stay
  while (t.keyed > own_from) {
    const size_t i = t.keyed - 1;
    const int32_t b = t.blocks[i - static_cast<size_t>(r.skipped)];
    if (blk(b).ref != 1) break;  // shared: another holder keeps it cached
    pool_.unindex_key(b);
    t.keyed = i;
  }
}

AllocResult PagedStore::allocate(RequestId request, int64_t prompt_tokens, int64_t max_total_tokens,
                                 const PrefixHashes& prefix) {
  if (groups_) [[unlikely]]
    return groups_->allocate(request, prompt_tokens, max_total_tokens, prefix);
  KVSIM_CHECK(!holds(request), "request {} already holds KV", request);
  KVSIM_CHECK(prompt_tokens >= 1 && prompt_tokens <= max_total_tokens,
              "request {}: prompt {} max_total {}", request, prompt_tokens, max_total_tokens);
  const int64_t nblocks = ceil_div(prompt_tokens, block_tokens_);
  // Prefix hits: the cached leading blocks cached_prefix_tokens() counts.
  std::vector<int32_t>& hits = hit_scratch_;
  hits.clear();
  if (prefix_caching_) {
    const int64_t n = cached_prefix_tokens(prefix, prompt_tokens) / block_tokens_;
    for (int64_t i = 0; i < n; ++i) hits.push_back(pool_.cached_block(key_of(prefix, i)));
  }
  int64_t from_free = nblocks;
  for (int32_t b : hits) {
    if (blk(b).ref > 0) --from_free;  // cached free hits still leave the list
  }
  if (from_free > free_blocks()) {
    return capacity_failure(from_free);
  }
  int32_t slot;
  if (free_slots_.empty()) {
    slot = static_cast<int32_t>(slots_.size());
    slots_.emplace_back();
    if (prefix_caching_) tables_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  Req& r = slots_[static_cast<size_t>(slot)];
  r.id = request;
  r.window = -1;
  r.tokens = prompt_tokens;
  r.max_total = max_total_tokens;
  r.held = nblocks;
  r.skipped = 0;  // nothing is computed yet: the prompt's blocks are all needed
  if (!prefix_caching_) {
    pool_.count_out(nblocks);
    live_tokens_ += prompt_tokens;
  } else {
    BlockTable& t = table(r);
    t.blocks.clear();
    t.blocks.reserve(static_cast<size_t>(nblocks));
    for (int32_t b : hits) {
      if (pool_.take(b)) {  // a cached free block: full of the prefix's tokens again
        blk(b).filled = static_cast<int32_t>(block_tokens_);
        live_tokens_ += block_tokens_;
      }
      t.blocks.push_back(b);
    }
    prefix_hits_ += static_cast<int64_t>(hits.size());
    t.keyed = hits.size();  // shared blocks already carry their keys
    t.owner = owner_of(prefix);
    t.keys.clear();
    for (int64_t i = 0, n = keyable_blocks(prefix, prompt_tokens); i < n; ++i) {
      t.keys.push_back(key_of(prefix, i));
    }
    for (int64_t i = static_cast<int64_t>(hits.size()); i < nblocks; ++i) {
      const int32_t b = pop_free();
      blk(b).ref = 1;
      const int64_t fill = std::min(block_tokens_, prompt_tokens - i * block_tokens_);
      blk(b).filled = static_cast<int32_t>(fill);
      live_tokens_ += fill;
      t.blocks.push_back(b);
    }
    key_full_blocks(r, t);
  }
  add_slack(r, +1);
  index_.insert(request, slot);
  return AllocResult::success();
}

void PagedStore::fail_held(const Req* r, RequestId request, const char* op) {
  KVSIM_CHECK(r != nullptr, "{}: request {} holds no KV", op, request);
  // held() calls this only for a missing request or an open window.
  detail::check_failed(
      __FILE__, __LINE__, "r->window < 0",
      fmt::format("{}: request {} has its deferral window open (settle first)", op, request));
}

AllocResult PagedStore::grow(RequestId request, int64_t new_total_tokens) {
  if (groups_) [[unlikely]]
    return groups_->grow(request, new_total_tokens);
  Req& r = held(request, "grow");
  KVSIM_CHECK(new_total_tokens > r.tokens, "request {}: grow to {} from {}", request,
              new_total_tokens, r.tokens);
  return grow_req(r, new_total_tokens);
}

AllocResult PagedStore::grow_to_at_least(RequestId request, int64_t tokens) {
  if (groups_) [[unlikely]]
    return KvStore::grow_to_at_least(request, tokens);
  Req& r = held(request, "grow_to_at_least");
  if (r.tokens >= tokens) return AllocResult::success();
  return grow_req(r, tokens);
}

int64_t PagedStore::blocks_to_skip(const Req& r, int64_t tokens) const {
  if (sliding_window_ == 0) return 0;
  const int64_t skipped = kv_group_skipped_blocks(window_group(), tokens, block_tokens_);
  return skipped == 0 ? 0 : skipped - r.skipped;
}

int64_t PagedStore::window_frees(RequestId request, int64_t target) const {
  if (groups_) return groups_->window_frees(request, target);
  if (sliding_window_ == 0) return 0;
  const Req* r = find(request);  // its window may be open: skipped does not move in it
  KVSIM_CHECK(r != nullptr, "window_frees: request {} holds no KV", request);
  const int64_t n = blocks_to_skip(*r, target - 1);
  return n > 0 ? skip_frees(*r, n) : 0;
}

int64_t PagedStore::skip_frees(const Req& r, int64_t n) const {
  int64_t freed = n;
  if (prefix_caching_) {
    const BlockTable& t = table(r);
    for (int64_t i = 0; i < n; ++i) freed -= blk(t.blocks[static_cast<size_t>(i)]).ref > 1;
  }
  return freed;
}

void PagedStore::skip_window_blocks(Req& r, int64_t n) {
  if (n <= 0) return;
  // Oldest first, as vLLM frees skipped blocks; they are full, so each takes block_tokens of
  // live KV with it. With prefix caching a freed block keeps its key until it is popped for
  // someone else, and a block another request shares stays held by that one (vLLM's BlockPool).
  if (prefix_caching_) {
    BlockTable& t = table(r);
    for (int64_t i = 0; i < n; ++i) unref(t.blocks[static_cast<size_t>(i)]);
    t.blocks.erase(t.blocks.begin(), t.blocks.begin() + n);
  } else {
    pool_.count_in(n);
    live_tokens_ -= n * block_tokens_;
  }
  r.held -= n;
  r.skipped += n;
  window_freed_ += n;
}

int64_t PagedStore::blocks_to_grow(RequestId request, int64_t tokens) const {
  if (groups_) return groups_->blocks_to_grow(request, tokens);
  const Req& r = held(request, "blocks_to_grow");
  const int64_t cap = span_tokens(r);
  if (tokens <= cap) return 0;  // its last block has room (cap >= r.tokens)
  // grow_req's test: need > free_blocks() + freed.
  const int64_t need = ceil_div(tokens, block_tokens_) - (r.skipped + r.held);
  return need - skip_frees(r, blocks_to_skip(r));
}

AllocResult PagedStore::grow_req(Req& r, int64_t new_total_tokens) {
  const int64_t skip = blocks_to_skip(r);
  const int64_t cap = span_tokens(r);
  int64_t need = 0;
  if (new_total_tokens > cap) {
    need = ceil_div(new_total_tokens, block_tokens_) - (r.skipped + r.held);  // cap's blocks
    // Blocks leaving the window serve the growth too (shared ones stay with their other owners).
    if (need > free_blocks() + skip_frees(r, skip)) {
      return capacity_failure(need);
    }
  }
  add_slack(r, -1);
  skip_window_blocks(r, skip);  // before the new blocks, as vLLM frees them before allocating
  if (prefix_caching_) {
    grow_blocks(r, new_total_tokens, need);
  } else {
    // The last block's room, then `need` new blocks, all filled but the last one's slack.
    pool_.count_out(need);
    live_tokens_ += new_total_tokens - r.tokens;
  }
  r.held += need;
  r.tokens = new_total_tokens;
  if (prefix_caching_) {
    // A chunk that completes the last block, or a chunked prefill's later chunk.
    BlockTable& t = table(r);
    if (t.keyed < t.keys.size() || t.owner >= 0) key_full_blocks(r, t);
  }
  add_slack(r, +1);
  return AllocResult::success();
}

void PagedStore::grow_blocks(Req& r, int64_t new_total_tokens, int64_t need) {
  BlockTable& t = table(r);
  // Fill the last block, then new ones. A shared (full) last block never has room.
  int64_t left = new_total_tokens - r.tokens;
  const int64_t cap = span_tokens(r);
  if (cap > 0) {
    const int64_t room = cap - r.tokens;  // the last block's free slots (0 when shared: full)
    const int64_t add = std::min(room, left);
    if (add > 0) blk(t.blocks.back()).filled += static_cast<int32_t>(add);
    live_tokens_ += add;
    left -= add;
  }
  for (int64_t i = 0; i < need; ++i) {
    const int32_t b = pop_free();
    const int64_t add = std::min(block_tokens_, left);
    blk(b).ref = 1;
    blk(b).filled = static_cast<int32_t>(add);
    live_tokens_ += add;
    left -= add;
    t.blocks.push_back(b);
  }
}

void PagedStore::release(RequestId request) {
  if (groups_) [[unlikely]]
    return groups_->release(request);
  const int32_t slot = index_.find(request);
  KVSIM_CHECK(slot != IdIndex::kNone, "release of request {} that holds no KV", request);
  Req& r = slots_[static_cast<size_t>(slot)];
  KVSIM_CHECK(r.window < 0, "release: request {} has its deferral window open (settle first)",
              request);
  add_slack(r, -1);
  if (prefix_caching_) {
    BlockTable& t = table(r);
    // The records were last touched long ago: fetch them all at once rather than one miss
    // after another.
    for (int32_t b : t.blocks) __builtin_prefetch(&blk(b), 1);
    // Tail first, so the blocks with the longest prefixes are evicted first (vLLM v1).
    for (auto b = t.blocks.rbegin(); b != t.blocks.rend(); ++b) unref(*b);
    t.blocks.clear();  // keeps its capacity for the slot's next request
    t.keys.clear();
    t.keyed = 0;
    t.owner = -1;
  } else {
    // Its blocks hold its tokens but those of its freed leading blocks.
    live_tokens_ -= r.tokens - r.skipped * block_tokens_;
    pool_.count_in(r.held);
  }
  r.held = 0;
  r.skipped = 0;
  r.id = -1;
  r.window = -1;
  index_.erase(request);
  free_slots_.push_back(slot);
}

const std::vector<int32_t>& PagedStore::block_table(RequestId request) const {
  KVSIM_CHECK(prefix_caching_, "block_table: block ids are kept only with prefix caching");
  return table(held(request, "block_table")).blocks;
}

KvUsage PagedStore::usage() const {
  if (groups_) return groups_->usage();
  return usage_of({free_blocks(), live_tokens_, reservation_tokens_});
}

KvUsage PagedStore::usage_of(const GrowthTotals& g) const {
  // internal = held - live - reservation = internal_tokens_ (check_invariants checks the sum).
  KvUsage u = held_usage(g.live_tokens, g.reservation_tokens, bytes_per_token_,
                         (num_blocks_ - g.free_count) * block_bytes_);
  u.capacity_bytes = num_blocks_ * block_bytes_;
  u.free_bytes = g.free_count * block_bytes_;
  u.external_bytes = 0;  // every free block serves any request
  u.requests = static_cast<int64_t>(index_.size());
  return u;
}

}  // namespace kvsim
