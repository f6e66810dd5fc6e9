#include "models/memory/paged_store.h"

#include <cstddef>
#include <limits>

#include "core/units.h"

#include <algorithm>

#include "core/check.h"

namespace kvsim {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Key of paged block `i` from the trace's prefix hashes: the hash entry that covers the block's
// last token names the whole prefix up to there; mixing in `i` tells apart blocks inside one
// hash block. 0 is reserved for "no key".
uint64_t block_key(uint64_t prefix_hash, int64_t i) {
  uint64_t x = prefix_hash ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(i + 1));
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x == 0 ? 1 : x;
}
}  // namespace

PagedStore::PagedStore(int64_t kv_bytes_per_token, PagedStoreOptions options)
    : bytes_per_token_(kv_bytes_per_token),
      block_tokens_(options.block_tokens),
      num_blocks_(options.num_blocks),
      block_bytes_(kv_bytes_per_token * options.block_tokens),
      prefix_caching_(options.enable_prefix_caching),
      sliding_window_(options.sliding_window) {
  KVSIM_CHECK(kv_bytes_per_token >= 1 && block_tokens_ >= 1 && num_blocks_ >= 1 &&
                  num_blocks_ < (int64_t{1} << 31),
              "bad paged store: {} bytes/token, {} tokens/block, {} blocks", kv_bytes_per_token,
              block_tokens_, num_blocks_);
  KVSIM_CHECK(sliding_window_ >= 0, "bad paged store: sliding window {}", sliding_window_);
  if (!prefix_caching_) {
    free_count_ = num_blocks_;  // counted, not listed (see the header)
    return;
  }
  blocks_.assign(static_cast<size_t>(num_blocks_), Block{});
  // Initial free order = block id, as vLLM's BlockPool.
  for (int32_t b = 0; b < static_cast<int32_t>(num_blocks_); ++b) push_free_back(b);
}

void PagedStore::push_free_back(int32_t b) {
  blk(b).prev = tail_;
  blk(b).next = -1;
  if (tail_ >= 0) {
    blk(tail_).next = b;
  } else {
    head_ = b;
  }
  tail_ = b;
  ++free_count_;
}

void PagedStore::unlink(int32_t b) {
  const int32_t p = blk(b).prev;
  const int32_t n = blk(b).next;
  if (p >= 0) {
    blk(p).next = n;
  } else {
    head_ = n;
  }
  if (n >= 0) {
    blk(n).prev = p;
  } else {
    tail_ = p;
  }
  blk(b).prev = blk(b).next = -1;
  --free_count_;
}

// Bytes a failed request wanted, for its report: a request longer than any pool (a billion
// tokens of a huge model) must not overflow while saying so.
static int64_t saturating_bytes(int64_t blocks, int64_t block_bytes) {
  return checked_mul(blocks, block_bytes).value_or(std::numeric_limits<int64_t>::max());
}

int32_t PagedStore::pop_free() {
  const int32_t b = head_;
  unlink(b);
  // A free block that still carries a prefix key is evicted from the prefix cache now.
  uint64_t& key = blk(b).key;
  if (key != 0) {
    auto it = by_key_.find(key);
    if (it != by_key_.end() && it->second == b) by_key_.erase(it);
    key = 0;
  }
  return b;
}

void PagedStore::unref(int32_t b) {
  int32_t& r = blk(b).ref;
  KVSIM_CHECK(r > 0, "double free of block {}", b);
  if (--r == 0) {
    live_tokens_ -= blk(b).filled;
    blk(b).filled = 0;
    push_free_back(b);
  }
}

int64_t PagedStore::keyable_blocks(const PrefixHashes& prefix, int64_t limit) const {
  if (!prefix_caching_ || prefix.block_tokens <= 0 || prefix.hashes.empty()) return 0;
  const int64_t prompt = prefix.prompt_tokens > 0 ? prefix.prompt_tokens : limit;
  const int64_t covered =
      std::min(prompt, static_cast<int64_t>(prefix.hashes.size()) * prefix.block_tokens);
  return covered / block_tokens_;
}

int64_t PagedStore::owner_of(const PrefixHashes& prefix) const {
  // (Not with a sliding window: its blocks leave from the front before they would be keyed.)
  return prefix_caching_ && sliding_window_ == 0 ? prefix.owner : -1;
}

int64_t PagedStore::lookup_blocks(const PrefixHashes& prefix, int64_t tokens) const {
  return owner_of(prefix) >= 0 ? tokens / block_tokens_ : keyable_blocks(prefix, tokens);
}

uint64_t PagedStore::own_key(int64_t owner, int64_t i) {
  // A 64-bit mix of the owner, apart from any prompt hash (a collision is a 2^-64 event).
  return block_key(0xd6e8feb86659fd93ULL * static_cast<uint64_t>(owner + 1) ^ 0x632be59bd9b4e019ULL,
                   i);
}

uint64_t PagedStore::key_of(const PrefixHashes& prefix, int64_t i) const {
  if (i >= keyable_blocks(prefix, 0) && owner_of(prefix) >= 0) return own_key(prefix.owner, i);
  const int64_t last_token = (i + 1) * block_tokens_ - 1;
  return block_key(prefix.hashes[static_cast<size_t>(last_token / prefix.block_tokens)], i);
}

int64_t PagedStore::cached_prefix_tokens(const PrefixHashes& prefix, int64_t tokens) const {
  // At most (tokens - 1) / block_tokens blocks: at least the last token is computed, and the
  // blocks stay whole (vLLM v1: max_cache_hit_length = num_tokens - 1, in whole blocks).
  const int64_t most = std::min(lookup_blocks(prefix, tokens), (tokens - 1) / block_tokens_);
  int64_t n = 0;
  while (n < most && by_key_.count(key_of(prefix, n)) != 0) ++n;  // a prefix, not a set
  return n * block_tokens_;
}

int64_t PagedStore::blocks_to_allocate(const PrefixHashes& prefix, int64_t tokens) const {
  int64_t need = ceil_div(tokens, block_tokens_);
  if (!prefix_caching_) return need;
  const int64_t hits = cached_prefix_tokens(prefix, tokens) / block_tokens_;
  for (int64_t i = 0; i < hits; ++i) {
    if (blk(by_key_.at(key_of(prefix, i))).ref > 0) --need;  // shared: no free block taken
  }
  return need;
}

void PagedStore::key_full_blocks(const Req& r, BlockTable& t) {
  const int64_t keyable = t.owner >= 0 ? r.tokens : static_cast<int64_t>(t.keys.size()) * block_tokens_;
  const auto full = static_cast<size_t>(std::min(keyable, r.tokens) / block_tokens_);
  // Keying follows the tokens and skipping lags them, so no freed block is ever keyed here.
  KVSIM_CHECK(t.keyed >= full || static_cast<int64_t>(t.keyed) >= r.skipped,
              "keying block {} of a request that freed {}", t.keyed, r.skipped);
  for (; t.keyed < full; ++t.keyed) {
    const int32_t b = t.blocks[t.keyed - static_cast<size_t>(r.skipped)];
    const uint64_t key = t.keyed < t.keys.size()
                             ? t.keys[t.keyed]
                             : own_key(t.owner, static_cast<int64_t>(t.keyed));
    blk(b).key = key;
    by_key_[key] = b;
  }
}

void PagedStore::uncache_past(RequestId request, int64_t tokens) {
  Req& r = held(request, "uncache_past");
  if (!prefix_caching_) return;
  BlockTable& t = table(r);
  const auto keep = static_cast<size_t>(std::max<int64_t>(tokens / block_tokens_, r.skipped));
  const size_t own_from = std::max(keep, t.keys.size());  // trace-hash keys stay
  while (t.keyed > own_from) {
    const size_t i = t.keyed - 1;
    const int32_t b = t.blocks[i - static_cast<size_t>(r.skipped)];
    if (blk(b).ref != 1) break;  // shared: another holder keeps it cached
    if (auto it = by_key_.find(blk(b).key); it != by_key_.end() && it->second == b) by_key_.erase(it);
    blk(b).key = 0;
    t.keyed = i;
  }
}

AllocResult PagedStore::allocate(RequestId request, int64_t prompt_tokens,
                                 int64_t max_total_tokens, const PrefixHashes& prefix) {
  KVSIM_CHECK(!holds(request), "request {} already holds KV", request);
  KVSIM_CHECK(prompt_tokens >= 1 && prompt_tokens <= max_total_tokens,
              "request {}: prompt {} max_total {}", request, prompt_tokens, max_total_tokens);
  const int64_t nblocks = ceil_div(prompt_tokens, block_tokens_);
  // Prefix hits: the cached leading blocks cached_prefix_tokens() counts.
  std::vector<int32_t>& hits = hit_scratch_;
  hits.clear();
  if (prefix_caching_) {
    const int64_t n = cached_prefix_tokens(prefix, prompt_tokens) / block_tokens_;
    for (int64_t i = 0; i < n; ++i) hits.push_back(by_key_.at(key_of(prefix, i)));
  }
  int64_t from_free = nblocks;
  for (int32_t b : hits) {
    if (blk(b).ref > 0) --from_free;  // cached free hits still leave the list
  }
  if (from_free > free_count_) {
    return AllocResult::failure(OomReason::kCapacity, saturating_bytes(from_free, block_bytes_),
                                free_count_ * block_bytes_, free_count_ > 0 ? block_bytes_ : 0);
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
    free_count_ -= nblocks;
    live_tokens_ += prompt_tokens;
  } else {
    BlockTable& t = table(r);
    t.blocks.clear();
    t.blocks.reserve(static_cast<size_t>(nblocks));
    for (int32_t b : hits) {
      if (blk(b).ref == 0) {
        unlink(b);
        blk(b).filled = static_cast<int32_t>(block_tokens_);
        live_tokens_ += block_tokens_;
      }
      ++blk(b).ref;
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
  detail::check_failed(__FILE__, __LINE__, "r->window < 0",
                       fmt::format("{}: request {} has its deferral window open (settle first)",
                                   op, request));
}

AllocResult PagedStore::grow(RequestId request, int64_t new_total_tokens) {
  Req& r = held(request, "grow");
  KVSIM_CHECK(new_total_tokens > r.tokens, "request {}: grow to {} from {}", request,
              new_total_tokens, r.tokens);
  return grow_req(r, new_total_tokens);
}

AllocResult PagedStore::grow_to_at_least(RequestId request, int64_t tokens) {
  Req& r = held(request, "grow_to_at_least");
  if (r.tokens >= tokens) return AllocResult::success();
  return grow_req(r, tokens);
}

int64_t PagedStore::blocks_to_skip(const Req& r, int64_t tokens) const {
  if (sliding_window_ == 0) return 0;
  // The next query (position `tokens`) attends to positions tokens - window + 1 onwards; the
  // blocks wholly before that are never read again.
  const int64_t first_needed = tokens - sliding_window_ + 1;
  return first_needed <= 0 ? 0 : first_needed / block_tokens_ - r.skipped;
}

int64_t PagedStore::window_frees(RequestId request, int64_t target) const {
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
    free_count_ += n;
    live_tokens_ -= n * block_tokens_;
  }
  r.held -= n;
  r.skipped += n;
  window_freed_ += n;
}

int64_t PagedStore::blocks_to_grow(RequestId request, int64_t tokens) const {
  const Req& r = held(request, "blocks_to_grow");
  const int64_t cap = span_tokens(r);
  if (tokens <= cap) return 0;  // its last block has room (cap >= r.tokens)
  // grow_req's test: need > free_count_ + freed.
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
    if (need > free_count_ + skip_frees(r, skip)) {
      return AllocResult::failure(OomReason::kCapacity, saturating_bytes(need, block_bytes_),
                                  free_count_ * block_bytes_, free_count_ > 0 ? block_bytes_ : 0);
    }
  }
  add_slack(r, -1);
  skip_window_blocks(r, skip);  // before the new blocks, as vLLM frees them before allocating
  if (prefix_caching_) {
    grow_blocks(r, new_total_tokens, need);
  } else {
    // The last block's room, then `need` new blocks, all filled but the last one's slack.
    free_count_ -= need;
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
    free_count_ += r.held;
  }
  r.held = 0;
  r.skipped = 0;
  r.id = -1;
  r.window = -1;
  index_.erase(request);
  free_slots_.push_back(slot);
}

int64_t PagedStore::tokens(RequestId request) const { return held(request, "tokens").tokens; }

int64_t PagedStore::tokens_until_growth_allocates(RequestId request) const {
  const Req& r = held(request, "tokens_until_growth_allocates");
  return span_tokens(r) - r.tokens;
}

int64_t PagedStore::open(RequestId request) {
  Req& r = held(request, "open");
  const int64_t cap = span_tokens(r);
  r.window = reservation_tokens(r.tokens, cap, r.max_total);
  return r.window;
}

bool PagedStore::crossings_swap(const Req& r) const {
  if (sliding_window_ == 0 || prefix_caching_) return false;
  // Its first crossing's target (a new block's first token) is after r.tokens; a growth to T
  // frees blocks_to_skip(r, T - 1), which grows by one each block later.
  const int64_t first = ceil_div(r.tokens, block_tokens_) * block_tokens_ + 1;
  return blocks_to_skip(r, first - 1) == 1;
}

bool PagedStore::long_window_swaps(RequestId request) const {
  if (sliding_window_ == 0) return false;
  const Req* r = find(request);
  KVSIM_CHECK(r != nullptr && r->window >= 0, "long_window_swaps: request {} has no open window",
              request);
  return crossings_swap(*r);
}

int64_t PagedStore::open_long(RequestId request) {
  KVSIM_CHECK(crossings_in_aggregate(), "open_long: blocks are not counted in aggregate here");
  Req& r = held(request, "open_long");
  int64_t end = r.max_total;
  if (sliding_window_ > 0 && !crossings_swap(r)) {
    // Growth to a target T with r.tokens = T - 1 frees floor((T - window) / block) - skipped
    // leading blocks (blocks_to_skip): some once T >= window + block (skipped + 1). The window
    // stops before the first crossing (T = 1 modulo the block, a new block's first token) that
    // does: that growth goes through grow_req, which frees them, as stepping's does.
    const int64_t frees_from = sliding_window_ + block_tokens_ * (r.skipped + 1);
    const int64_t first = std::max(frees_from, r.tokens + 1);
    end = std::min(end, ceil_div(first - 1, block_tokens_) * block_tokens_);
  }
  r.window = end - r.tokens;
  return r.window;
}

void PagedStore::add_crossings(int64_t n) {
  // Each is grow_req's step for one token that needs one new block whose end is within its
  // request's max_total: the block leaves the free list, the token is live, and the rest of the
  // block is reservation (its last block was full: no slack before).
  KVSIM_CHECK(n >= 0 && n <= free_count_, "{} block crossings with {} blocks free", n, free_count_);
  if (prefix_caching_) {
    // With block ids: the blocks leave the free list now, as many as stepping's growth takes at
    // this step and from the same end (each evicts the prefix it still carried), and each
    // request takes its own at settle(). Which request holds which may differ from stepping's:
    // a relabelling of blocks that carry no prefix, which no figure tells apart.
    for (int64_t i = 0; i < n; ++i) {
      const int32_t b = pop_free();
      blk(b).ref = 1;
      blk(b).filled = 0;
      crossed_ids_.push_back(b);
    }
    free_count_ += n;  // grow_totals counts them off
  }
  crossed_blocks_ += n;
  deferred_tokens_ += n;
  grow_totals(n, n);
}

void PagedStore::add_swaps(int64_t n) {
  // Each is grow_req's step for a token that starts a new block and frees the request's oldest
  // (full) one: add_crossings' block, and one back on the free list with its tokens.
  KVSIM_CHECK(n >= 0 && !prefix_caching_, "{} block swaps (prefix caching: {})", n, prefix_caching_);
  crossed_blocks_ += n;
  swapped_blocks_ += n;
  deferred_tokens_ += n;
  window_freed_ += n;
  grow_totals(n, n, n);
}

void PagedStore::grow_totals(int64_t tokens, int64_t crossings, int64_t swaps) {
  GrowthTotals g{free_count_, live_tokens_, reservation_tokens_};
  grow_totals(g, tokens, crossings, swaps, block_tokens_);
  free_count_ = g.free_count;
  live_tokens_ = g.live_tokens;
  reservation_tokens_ = g.reservation_tokens;
}

std::optional<KvUsage> PagedStore::usage_after(int64_t tokens, int64_t crossings,
                                               int64_t swaps) const {
  GrowthTotals g{free_count_, live_tokens_, reservation_tokens_};
  grow_totals(g, tokens, crossings + swaps, swaps, block_tokens_);
  return usage_of(g);
}

void PagedStore::add(int64_t tokens) {
  // Each deferred token is one of some request's reservation tokens becoming live (see room()):
  // the same change grow_req would make, summed.
  KVSIM_CHECK(tokens >= 0 && tokens <= reservation_tokens_, "deferring {} tokens with {} reserved",
              tokens, reservation_tokens_);
  deferred_tokens_ += tokens;
  grow_totals(tokens, 0);
}

void PagedStore::settle(RequestId request, int64_t tokens) {
  Req* r = find(request);
  KVSIM_CHECK(r != nullptr, "request {} holds no KV", request);
  KVSIM_CHECK(r->window >= 0, "request {}: settling a deferral window that is not open", request);
  KVSIM_CHECK(tokens >= 0 && tokens <= deferred_tokens_ && tokens <= r->window,
              "request {}: settling {} deferred tokens ({} outstanding) in a window of {}", request,
              tokens, deferred_tokens_, r->window);
  r->window = -1;
  // live and reservation already moved in add(), add_crossings() and add_swaps(); the request's
  // own figures catch up, with the blocks its tokens crossed into (a long window's), each of
  // which freed its oldest block if its crossings swap.
  const int64_t cap = span_tokens(*r);  // its blocks' end before them
  const bool swaps = crossings_swap(*r);  // as when its window opened: the same state
  r->tokens += tokens;
  const int64_t crossed = ceil_div(r->tokens, block_tokens_) - r->skipped - r->held;
  if (crossed > 0) {
    KVSIM_CHECK(crossed <= crossed_blocks_ && (!swaps || crossed <= swapped_blocks_),
                "request {}: settling {} crossed blocks, {} taken, {} swapped", request, crossed,
                crossed_blocks_, swapped_blocks_);
    crossed_blocks_ -= crossed;
    if (swaps) {
      r->skipped += crossed;
      swapped_blocks_ -= crossed;
    } else {
      r->held += crossed;
    }
  }
  if (prefix_caching_) {
    // Its last block's room first, then the crossed blocks in order, as grow_blocks fills them.
    BlockTable& t = table(*r);
    const int64_t room = std::min(cap - (r->tokens - tokens), tokens);
    if (room > 0) blk(t.blocks.back()).filled += static_cast<int32_t>(room);
    int64_t left = tokens - room;
    for (int64_t i = 0; i < crossed; ++i) {
      const int32_t b = crossed_ids_.front();
      crossed_ids_.pop_front();
      blk(b).filled = static_cast<int32_t>(std::min(block_tokens_, left));
      left -= block_tokens_;
      t.blocks.push_back(b);
    }
    // Blocks its generated tokens filled are cached now (none is looked up before: only the
    // request itself knows their keys, and it settles before it releases them).
    if (t.owner >= 0) key_full_blocks(*r, t);
  }
  deferred_tokens_ -= tokens;
}

const std::vector<int32_t>& PagedStore::block_table(RequestId request) const {
  KVSIM_CHECK(prefix_caching_, "block_table: block ids are kept only with prefix caching");
  return table(held(request, "block_table")).blocks;
}

KvUsage PagedStore::usage() const {
  return usage_of({free_count_, live_tokens_, reservation_tokens_});
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

void PagedStore::check_invariants() const {
  KVSIM_CHECK(deferred_tokens_ == 0, "{} deferred tokens not settled", deferred_tokens_);
  KVSIM_CHECK(crossed_blocks_ == 0 && swapped_blocks_ == 0 && crossed_ids_.empty(),
              "{} crossed blocks not settled", crossed_blocks_);
  int64_t reservation = 0, internal = 0;
  int64_t held = 0, used = 0, live = 0;
  for (const Req& r : slots_) {
    if (r.id < 0) continue;
    const RequestId id = r.id;
    ++held;
    KVSIM_CHECK(index_.find(id) != IdIndex::kNone &&
                    &slots_[static_cast<size_t>(index_.find(id))] == &r,
                "request {} is not indexed to its slot", id);
    KVSIM_CHECK(r.held >= 0 && r.skipped + r.held == ceil_div(r.tokens, block_tokens_),
                "request {} holds {} blocks ({} freed) for {} tokens", id, r.held, r.skipped,
                r.tokens);
    // Freed leading blocks lie wholly before the window of the tokens computed so far.
    KVSIM_CHECK(r.skipped == 0 || (sliding_window_ > 0 &&
                                   r.skipped * block_tokens_ <= r.tokens - sliding_window_),
                "request {} freed {} blocks of {} tokens with a window of {}", id, r.skipped,
                r.tokens, sliding_window_);
    const int64_t cap = span_tokens(r);
    const int64_t res = reservation_tokens(r.tokens, cap, r.max_total);
    reservation += res;
    internal += cap - r.tokens - res;
    KVSIM_CHECK(cap - r.tokens < block_tokens_, "request {} wastes a whole block", id);
    // Without sharing (no prefix caching), its blocks are its own and hold its tokens but the
    // freed ones'.
    used += r.held;
    live += r.tokens - r.skipped * block_tokens_;
  }
  KVSIM_CHECK(held == static_cast<int64_t>(index_.size()) &&
                  held + static_cast<int64_t>(free_slots_.size()) ==
                      static_cast<int64_t>(slots_.size()),
              "{} held slots, {} indexed, {} free of {}", held, index_.size(), free_slots_.size(),
              slots_.size());
  KVSIM_CHECK(reservation == reservation_tokens_ && internal == internal_tokens_,
              "slack {}+{} != tracked {}+{}", reservation, internal, reservation_tokens_,
              internal_tokens_);
  if (prefix_caching_) {
    check_block_records();  // blocks may be shared: count them from their records
    return;
  }
  KVSIM_CHECK(free_count_ >= 0 && used + free_count_ == num_blocks_,
              "{} blocks held + {} free != {} blocks (leak)", used, free_count_, num_blocks_);
  KVSIM_CHECK(live == live_tokens_, "live tokens {} != tracked {}", live, live_tokens_);
}

void PagedStore::check_block_records() const {
  // Reference counts equal the number of block-table entries; free list = blocks with ref 0.
  std::vector<int32_t> owners(static_cast<size_t>(num_blocks_), 0);
  for (const Req& r : slots_) {
    if (r.id < 0) continue;
    const BlockTable& t = table(r);
    KVSIM_CHECK(static_cast<int64_t>(t.blocks.size()) == r.held,
                "request {} lists {} blocks, holds {}", r.id, t.blocks.size(), r.held);
    KVSIM_CHECK((t.keyed <= t.keys.size() || t.owner >= 0) &&
                    static_cast<int64_t>(t.keyed) <= r.skipped + r.held,
                "request {} keyed {} of {} keys, {} blocks", r.id, t.keyed, t.keys.size(),
                r.held);
    for (int32_t b : t.blocks) ++owners[static_cast<size_t>(b)];
  }
  int64_t listed = 0;
  for (int32_t b = head_; b >= 0; b = blk(b).next) {
    KVSIM_CHECK(blk(b).ref == 0, "free-listed block {} has ref {}", b, blk(b).ref);
    KVSIM_CHECK(++listed <= num_blocks_, "free list has a cycle");
  }
  KVSIM_CHECK(listed == free_count_, "free list holds {} blocks, count says {}", listed,
              free_count_);
  int64_t live = 0, used = 0;
  for (int64_t b = 0; b < num_blocks_; ++b) {
    const auto i = static_cast<size_t>(b);
    const Block& k = blocks_[i];
    KVSIM_CHECK(k.ref == owners[i], "block {} has ref {} but {} owners", b, k.ref, owners[i]);
    if (k.ref > 0) {
      ++used;
      live += k.filled;
      KVSIM_CHECK(k.ref == 1 || k.filled == block_tokens_, "shared block {} is not full", b);
    } else {
      KVSIM_CHECK(k.filled == 0, "free block {} still holds {} tokens", b, k.filled);
    }
  }
  KVSIM_CHECK(used + free_count_ == num_blocks_, "{} used + {} free != {} blocks (leak)", used,
              free_count_, num_blocks_);
  KVSIM_CHECK(live == live_tokens_, "live tokens {} != tracked {}", live, live_tokens_);
  KVSIM_CHECK(live + reservation_tokens_ + internal_tokens_ == used * block_tokens_,
              "live {} + slack {} != {} held tokens", live,
              reservation_tokens_ + internal_tokens_, used * block_tokens_);
  for (const auto& [key, b] : by_key_) {
    KVSIM_CHECK(blk(b).key == key, "prefix key of block {} is stale", b);
  }
}

}  // namespace kvsim
