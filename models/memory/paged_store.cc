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
  const auto n = static_cast<size_t>(num_blocks_);
  blocks_.assign(n, Block{});
  records_ = prefix_caching_;
  if (!prefix_caching_) ring_.resize(n);
  // Initial free order = block id, as vLLM's BlockPool.
  for (int32_t b = 0; b < static_cast<int32_t>(num_blocks_); ++b) push_free_back(b);
}

void PagedStore::push_free_back(int32_t b) {
  if (!prefix_caching_) {
    int64_t at = ring_head_ + free_count_;
    if (at >= num_blocks_) at -= num_blocks_;
    ring_[static_cast<size_t>(at)] = b;
    ++free_count_;
    return;
  }
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
  KVSIM_CHECK(prefix_caching_, "block {} taken out of the middle of the free ring", b);
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
  if (!prefix_caching_) {
    const int32_t b = ring_[static_cast<size_t>(ring_head_)];
    if (++ring_head_ == num_blocks_) ring_head_ = 0;
    --free_count_;
    return b;
  }
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

// Slack of a request's last block: reservation up to max_total, internal beyond it.
void PagedStore::add_slack(const Req& r, int sign) {
  const int64_t cap = span_tokens(r);
  const int64_t reservation = reservation_tokens(r.tokens, cap, r.max_total);
  const int64_t internal = cap - r.tokens - reservation;
  reservation_tokens_ += sign * reservation;
  internal_tokens_ += sign * internal;
}

int64_t PagedStore::keyable_blocks(const PrefixHashes& prefix, int64_t limit) const {
  if (!prefix_caching_ || prefix.block_tokens <= 0 || prefix.hashes.empty()) return 0;
  const int64_t prompt = prefix.prompt_tokens > 0 ? prefix.prompt_tokens : limit;
  const int64_t covered =
      std::min(prompt, static_cast<int64_t>(prefix.hashes.size()) * prefix.block_tokens);
  return covered / block_tokens_;
}

uint64_t PagedStore::key_of(const PrefixHashes& prefix, int64_t i) const {
  const int64_t last_token = (i + 1) * block_tokens_ - 1;
  return block_key(prefix.hashes[static_cast<size_t>(last_token / prefix.block_tokens)], i);
}

int64_t PagedStore::cached_prefix_tokens(const PrefixHashes& prefix, int64_t tokens) const {
  // At most (tokens - 1) / block_tokens blocks: at least the last token is computed, and the
  // blocks stay whole (vLLM v1: max_cache_hit_length = num_tokens - 1, in whole blocks).
  const int64_t most = std::min(keyable_blocks(prefix, tokens), (tokens - 1) / block_tokens_);
  int64_t n = 0;
  while (n < most && by_key_.count(key_of(prefix, n)) != 0) ++n;  // a prefix, not a set
  return n * block_tokens_;
}

void PagedStore::key_full_blocks(Req& r) {
  const auto full = static_cast<size_t>(
      std::min(static_cast<int64_t>(r.keys.size()), r.tokens / block_tokens_));
  // Keying follows the tokens and skipping lags them, so no freed block is ever keyed here.
  KVSIM_CHECK(r.keyed >= full || static_cast<int64_t>(r.keyed) >= r.skipped,
              "keying block {} of a request that freed {}", r.keyed, r.skipped);
  for (; r.keyed < full; ++r.keyed) {
    const int32_t b = r.blocks[r.keyed - static_cast<size_t>(r.skipped)];
    blk(b).key = r.keys[r.keyed];
    by_key_[r.keys[r.keyed]] = b;
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
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  Req& r = slots_[static_cast<size_t>(slot)];
  r.id = request;
  r.window = -1;
  r.tokens = prompt_tokens;
  r.max_total = max_total_tokens;
  r.skipped = 0;  // nothing is computed yet: the prompt's blocks are all needed
  r.blocks.clear();
  r.blocks.reserve(static_cast<size_t>(nblocks));
  for (int32_t b : hits) {
    if (blk(b).ref == 0) {
      unlink(b);
      blk(b).filled = static_cast<int32_t>(block_tokens_);
      live_tokens_ += block_tokens_;
    }
    ++blk(b).ref;
    r.blocks.push_back(b);
  }
  prefix_hits_ += static_cast<int64_t>(hits.size());
  r.keyed = hits.size();  // shared blocks already carry their keys
  r.keys.clear();
  for (int64_t i = 0, n = keyable_blocks(prefix, prompt_tokens); i < n; ++i) {
    r.keys.push_back(key_of(prefix, i));
  }
  if (!records_) {
    // No prefix caching: the next nblocks ids of the ring, as pop_free() would give them one by
    // one, copied in at most two pieces; their fills sum to the prompt.
    const auto head = static_cast<ptrdiff_t>(ring_head_);
    const int64_t first = std::min(nblocks, num_blocks_ - ring_head_);
    r.blocks.assign(ring_.begin() + head, ring_.begin() + head + first);
    r.blocks.insert(r.blocks.end(), ring_.begin(), ring_.begin() + (nblocks - first));
    ring_head_ += nblocks;
    if (ring_head_ >= num_blocks_) ring_head_ -= num_blocks_;
    free_count_ -= nblocks;
    live_tokens_ += prompt_tokens;
  }
  for (int64_t i = records_ ? static_cast<int64_t>(hits.size()) : nblocks; i < nblocks; ++i) {
    const int32_t b = pop_free();
    const int64_t fill = std::min(block_tokens_, prompt_tokens - i * block_tokens_);
    if (records_) {
      blk(b).ref = 1;
      blk(b).filled = static_cast<int32_t>(fill);
    }
    live_tokens_ += fill;
    r.blocks.push_back(b);
  }
  if (records_) key_full_blocks(r);
  add_slack(r, +1);
  index_.insert(request, slot);
  return AllocResult::success();
}

void PagedStore::check_held(const Req* r, RequestId request, const char* op) {
  KVSIM_CHECK(r != nullptr, "{}: request {} holds no KV", op, request);
  KVSIM_CHECK(r->window < 0, "{}: request {} has its deferral window open (settle first)", op,
              request);
}

PagedStore::Req& PagedStore::held(RequestId request, const char* op) {
  Req* r = find(request);
  check_held(r, request, op);
  return *r;
}

const PagedStore::Req& PagedStore::held(RequestId request, const char* op) const {
  const Req* r = find(request);
  check_held(r, request, op);
  return *r;
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

int64_t PagedStore::blocks_to_skip(const Req& r) const {
  if (sliding_window_ == 0) return 0;
  // The next query (position r.tokens) attends to positions r.tokens - window + 1 onwards; the
  // blocks wholly before that are never read again.
  const int64_t first_needed = r.tokens - sliding_window_ + 1;
  return first_needed <= 0 ? 0 : first_needed / block_tokens_ - r.skipped;
}

void PagedStore::skip_window_blocks(Req& r, int64_t n) {
  if (n <= 0) return;
  // Oldest first, as vLLM frees skipped blocks; they are full, so each takes block_tokens of
  // live KV with it. With prefix caching a freed block keeps its key until it is popped for
  // someone else, and a block another request shares stays held by that one (vLLM's BlockPool).
  for (int64_t i = 0; i < n; ++i) {
    const int32_t b = r.blocks[static_cast<size_t>(i)];
    if (records_) {
      unref(b);
    } else {
      push_free_back(b);
    }
  }
  r.blocks.erase(r.blocks.begin(), r.blocks.begin() + n);
  if (!records_) live_tokens_ -= n * block_tokens_;
  r.skipped += n;
  window_freed_ += n;
}

int64_t PagedStore::blocks_to_grow(RequestId request, int64_t tokens) const {
  const Req& r = held(request, "blocks_to_grow");
  const int64_t cap = span_tokens(r);
  if (tokens <= r.tokens || tokens <= cap) return 0;
  // grow_req's test: need > free_count_ + freed.
  const int64_t skip = blocks_to_skip(r);
  int64_t freed = skip;
  if (records_) {
    for (int64_t i = 0; i < skip; ++i) freed -= blk(r.blocks[static_cast<size_t>(i)]).ref > 1;
  }
  return ceil_div(tokens, block_tokens_) - cap / block_tokens_ - freed;
}

AllocResult PagedStore::grow_req(Req& r, int64_t new_total_tokens) {
  const int64_t skip = blocks_to_skip(r);
  const int64_t cap = span_tokens(r);
  if (new_total_tokens <= cap) {
    skip_window_blocks(r, skip);
    // The decode step's usual case: the last block has room, so no block moves. Same
    // bookkeeping as below with need = 0, without the division.
    add_slack(r, -1);
    const int64_t add = new_total_tokens - r.tokens;
    if (records_) blk(r.blocks.back()).filled += static_cast<int32_t>(add);
    live_tokens_ += add;
    r.tokens = new_total_tokens;
    if (r.keyed < r.keys.size()) key_full_blocks(r);  // a chunk that completes the last block
    add_slack(r, +1);
    return AllocResult::success();
  }
  const int64_t need = ceil_div(new_total_tokens, block_tokens_) - cap / block_tokens_;
  // Blocks leaving the window serve the growth too (shared ones stay with their other owners).
  int64_t freed = skip;
  if (records_) {
    for (int64_t i = 0; i < skip; ++i) freed -= blk(r.blocks[static_cast<size_t>(i)]).ref > 1;
  }
  if (need > free_count_ + freed) {
    return AllocResult::failure(OomReason::kCapacity, saturating_bytes(need, block_bytes_),
                                free_count_ * block_bytes_, free_count_ > 0 ? block_bytes_ : 0);
  }
  add_slack(r, -1);
  skip_window_blocks(r, skip);  // before the pops, as vLLM frees them before allocating
  // Fill the last block, then new ones. A shared (full) last block never has room.
  int64_t left = new_total_tokens - r.tokens;
  if (cap > 0) {
    const int64_t room = cap - r.tokens;  // the last block's free slots (0 when shared: full)
    const int64_t add = std::min(room, left);
    if (records_ && add > 0) blk(r.blocks.back()).filled += static_cast<int32_t>(add);
    live_tokens_ += add;
    left -= add;
  }
  for (int64_t i = 0; i < need; ++i) {
    const int32_t b = pop_free();
    const int64_t add = std::min(block_tokens_, left);
    if (records_) {
      blk(b).ref = 1;
      blk(b).filled = static_cast<int32_t>(add);
    }
    live_tokens_ += add;
    left -= add;
    r.blocks.push_back(b);
  }
  r.tokens = new_total_tokens;
  if (r.keyed < r.keys.size()) key_full_blocks(r);  // a chunked prefill's later chunk
  add_slack(r, +1);
  return AllocResult::success();
}

void PagedStore::release(RequestId request) {
  const int32_t slot = index_.find(request);
  KVSIM_CHECK(slot != IdIndex::kNone, "release of request {} that holds no KV", request);
  Req& r = slots_[static_cast<size_t>(slot)];
  KVSIM_CHECK(r.window < 0, "release: request {} has its deferral window open (settle first)",
              request);
  add_slack(r, -1);
  // Tail first, so the blocks with the longest prefixes are evicted first (vLLM v1).
  if (records_) {
    // The records were last touched long ago: fetch them all at once rather than one miss
    // after another.
    for (int32_t b : r.blocks) __builtin_prefetch(&blk(b), 1);
    for (auto b = r.blocks.rbegin(); b != r.blocks.rend(); ++b) unref(*b);
  } else {
    // The blocks' fills sum to the request's tokens but those of its freed leading blocks.
    live_tokens_ -= r.tokens - r.skipped * block_tokens_;
    for (auto b = r.blocks.rbegin(); b != r.blocks.rend(); ++b) push_free_back(*b);
  }
  r.blocks.clear();  // keeps its capacity for the slot's next request
  r.keys.clear();
  r.keyed = 0;
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

void PagedStore::add(int64_t tokens) {
  // Each deferred token is one of some request's reservation tokens becoming live (see room()):
  // the same change grow_req would make, summed.
  KVSIM_CHECK(tokens >= 0 && tokens <= reservation_tokens_, "deferring {} tokens with {} reserved",
              tokens, reservation_tokens_);
  live_tokens_ += tokens;
  reservation_tokens_ -= tokens;
  deferred_tokens_ += tokens;
}

void PagedStore::settle(RequestId request, int64_t tokens) {
  Req* r = find(request);
  KVSIM_CHECK(r != nullptr, "request {} holds no KV", request);
  KVSIM_CHECK(r->window >= 0, "request {}: settling a deferral window that is not open", request);
  KVSIM_CHECK(tokens >= 0 && tokens <= deferred_tokens_ && tokens <= r->window,
              "request {}: settling {} deferred tokens ({} outstanding) in a window of {}", request,
              tokens, deferred_tokens_, r->window);
  r->window = -1;
  // live and reservation already moved in add(); the request's own figures catch up.
  r->tokens += tokens;
  if (records_) blk(r->blocks.back()).filled += static_cast<int32_t>(tokens);
  deferred_tokens_ -= tokens;
}

const std::vector<int32_t>& PagedStore::block_table(RequestId request) const {
  return held(request, "block_table").blocks;
}

KvUsage PagedStore::usage() const {
  // internal = held - live - reservation = internal_tokens_ (check_invariants checks the sum).
  KvUsage u = held_usage(live_tokens_, reservation_tokens_, bytes_per_token_,
                         (num_blocks_ - free_count_) * block_bytes_);
  u.capacity_bytes = num_blocks_ * block_bytes_;
  u.free_bytes = free_count_ * block_bytes_;
  u.external_bytes = 0;  // every free block serves any request
  u.requests = static_cast<int64_t>(index_.size());
  return u;
}

void PagedStore::check_invariants() const {
  KVSIM_CHECK(deferred_tokens_ == 0, "{} deferred tokens not settled", deferred_tokens_);
  // Reference counts equal the number of block-table entries; free list = blocks with ref 0.
  std::vector<int32_t> owners(static_cast<size_t>(num_blocks_), 0);
  // Without records (no prefix caching): each held block's fill, from its request's tokens.
  std::vector<int32_t> fill(records_ ? 0 : static_cast<size_t>(num_blocks_), 0);
  int64_t reservation = 0, internal = 0;
  int64_t held = 0;
  for (const Req& r : slots_) {
    if (r.id < 0) continue;
    const RequestId id = r.id;
    ++held;
    KVSIM_CHECK(index_.find(id) != IdIndex::kNone &&
                    &slots_[static_cast<size_t>(index_.find(id))] == &r,
                "request {} is not indexed to its slot", id);
    KVSIM_CHECK(r.skipped + static_cast<int64_t>(r.blocks.size()) ==
                    ceil_div(r.tokens, block_tokens_),
                "request {} holds {} blocks ({} freed) for {} tokens", id, r.blocks.size(),
                r.skipped, r.tokens);
    // Freed leading blocks lie wholly before the window of the tokens computed so far.
    KVSIM_CHECK(r.skipped == 0 || (sliding_window_ > 0 &&
                                   r.skipped * block_tokens_ <= r.tokens - sliding_window_),
                "request {} freed {} blocks of {} tokens with a window of {}", id, r.skipped,
                r.tokens, sliding_window_);
    const int64_t span_blocks = r.skipped + static_cast<int64_t>(r.blocks.size());
    KVSIM_CHECK(r.keyed <= r.keys.size() && static_cast<int64_t>(r.keyed) <= span_blocks,
                "request {} keyed {} of {} keys, {} blocks", id, r.keyed, r.keys.size(),
                r.blocks.size());
    for (size_t j = 0; j < r.blocks.size(); ++j) {
      const auto b = static_cast<size_t>(r.blocks[j]);
      ++owners[b];
      if (!records_) {
        fill[b] = static_cast<int32_t>(std::min(
            block_tokens_, r.tokens - (r.skipped + static_cast<int64_t>(j)) * block_tokens_));
      }
    }
    const int64_t cap = span_tokens(r);
    const int64_t res = reservation_tokens(r.tokens, cap, r.max_total);
    reservation += res;
    internal += cap - r.tokens - res;
    KVSIM_CHECK(cap - r.tokens < block_tokens_, "request {} wastes a whole block", id);
  }
  KVSIM_CHECK(held == static_cast<int64_t>(index_.size()) &&
                  held + static_cast<int64_t>(free_slots_.size()) ==
                      static_cast<int64_t>(slots_.size()),
              "{} held slots, {} indexed, {} free of {}", held, index_.size(), free_slots_.size(),
              slots_.size());
  int64_t listed = 0;
  if (!prefix_caching_) {
    std::vector<char> seen(static_cast<size_t>(num_blocks_), 0);
    for (int64_t i = 0; i < free_count_; ++i) {
      const int32_t b = ring_[static_cast<size_t>((ring_head_ + i) % num_blocks_)];
      KVSIM_CHECK(owners[static_cast<size_t>(b)] == 0, "free-ring block {} has {} owners", b,
                  owners[static_cast<size_t>(b)]);
      KVSIM_CHECK(!seen[static_cast<size_t>(b)]++, "block {} is in the free ring twice", b);
      ++listed;
    }
  }
  for (int32_t b = head_; b >= 0; b = blk(b).next) {
    KVSIM_CHECK(blk(b).ref == 0, "free-listed block {} has ref {}", b,
                blk(b).ref);
    KVSIM_CHECK(++listed <= num_blocks_, "free list has a cycle");
  }
  KVSIM_CHECK(listed == free_count_, "free list holds {} blocks, count says {}", listed,
              free_count_);
  int64_t live = 0, used = 0;
  for (int64_t b = 0; b < num_blocks_; ++b) {
    const auto i = static_cast<size_t>(b);
    if (!records_) {  // nothing is shared; fills come from the block tables
      KVSIM_CHECK(owners[i] <= 1, "block {} has {} owners without prefix caching", b, owners[i]);
      if (owners[i] > 0) {
        ++used;
        live += fill[i];
      }
      continue;
    }
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
  KVSIM_CHECK((live + reservation + internal) == used * block_tokens_,
              "live {} + slack {} != {} held tokens", live, reservation + internal,
              used * block_tokens_);
  KVSIM_CHECK(reservation == reservation_tokens_ && internal == internal_tokens_,
              "slack {}+{} != tracked {}+{}", reservation, internal, reservation_tokens_,
              internal_tokens_);
  for (const auto& [key, b] : by_key_) {
    KVSIM_CHECK(blk(b).key == key, "prefix key of block {} is stale", b);
  }
}

}  // namespace kvsim
