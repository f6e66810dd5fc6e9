#include "models/memory/paged_store.h"

#include <limits>

#include "sim/core/units.h"

#include <algorithm>

#include "sim/core/check.h"

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
      prefix_caching_(options.enable_prefix_caching) {
  KVSIM_CHECK(kv_bytes_per_token >= 1 && block_tokens_ >= 1 && num_blocks_ >= 1 &&
                  num_blocks_ < (int64_t{1} << 31),
              "bad paged store: {} bytes/token, {} tokens/block, {} blocks", kv_bytes_per_token,
              block_tokens_, num_blocks_);
  const auto n = static_cast<size_t>(num_blocks_);
  ref_.assign(n, 0);
  filled_.assign(n, 0);
  prev_.resize(n);
  next_.resize(n);
  key_.assign(n, 0);
  // Initial free order = block id, as vLLM's BlockPool.
  for (int32_t b = 0; b < static_cast<int32_t>(num_blocks_); ++b) push_free_back(b);
}

void PagedStore::push_free_back(int32_t b) {
  prev_[static_cast<size_t>(b)] = tail_;
  next_[static_cast<size_t>(b)] = -1;
  if (tail_ >= 0) {
    next_[static_cast<size_t>(tail_)] = b;
  } else {
    head_ = b;
  }
  tail_ = b;
  ++free_count_;
}

void PagedStore::unlink(int32_t b) {
  const int32_t p = prev_[static_cast<size_t>(b)];
  const int32_t n = next_[static_cast<size_t>(b)];
  if (p >= 0) {
    next_[static_cast<size_t>(p)] = n;
  } else {
    head_ = n;
  }
  if (n >= 0) {
    prev_[static_cast<size_t>(n)] = p;
  } else {
    tail_ = p;
  }
  prev_[static_cast<size_t>(b)] = next_[static_cast<size_t>(b)] = -1;
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
  uint64_t& key = key_[static_cast<size_t>(b)];
  if (key != 0) {
    auto it = by_key_.find(key);
    if (it != by_key_.end() && it->second == b) by_key_.erase(it);
    key = 0;
  }
  return b;
}

void PagedStore::unref(int32_t b) {
  int32_t& r = ref_[static_cast<size_t>(b)];
  KVSIM_CHECK(r > 0, "double free of block {}", b);
  if (--r == 0) {
    live_tokens_ -= filled_[static_cast<size_t>(b)];
    filled_[static_cast<size_t>(b)] = 0;
    push_free_back(b);
  }
}

// Slack of a request's last block: reservation up to max_total, internal beyond it.
void PagedStore::add_slack(const Req& r, int sign) {
  const int64_t cap = static_cast<int64_t>(r.blocks.size()) * block_tokens_;
  const int64_t reservation = std::max<int64_t>(0, std::min(cap, r.max_total) - r.tokens);
  const int64_t internal = cap - r.tokens - reservation;
  reservation_tokens_ += sign * reservation;
  internal_tokens_ += sign * internal;
}

AllocResult PagedStore::allocate(RequestId request, int64_t prompt_tokens,
                                 int64_t max_total_tokens, const PrefixHashes& prefix) {
  KVSIM_CHECK(!holds(request), "request {} already holds KV", request);
  KVSIM_CHECK(prompt_tokens >= 1 && prompt_tokens <= max_total_tokens,
              "request {}: prompt {} max_total {}", request, prompt_tokens, max_total_tokens);
  const int64_t nblocks = ceil_div(prompt_tokens, block_tokens_);
  // Prefix hits: full prompt blocks covered by the hashes whose key is already cached.
  std::vector<int32_t> hits;
  std::vector<uint64_t> keys;
  if (prefix_caching_ && prefix.block_tokens > 0 && !prefix.hashes.empty()) {
    const int64_t covered = std::min(
        prompt_tokens, static_cast<int64_t>(prefix.hashes.size()) * prefix.block_tokens);
    const int64_t full = covered / block_tokens_;
    for (int64_t i = 0; i < full; ++i) {
      const int64_t last_token = (i + 1) * block_tokens_ - 1;
      keys.push_back(
          block_key(prefix.hashes[static_cast<size_t>(last_token / prefix.block_tokens)], i));
    }
    for (uint64_t k : keys) {  // sharing stops at the first miss: a prefix, not a set
      auto it = by_key_.find(k);
      if (it == by_key_.end()) break;
      hits.push_back(it->second);
    }
  }
  int64_t from_free = nblocks;
  for (int32_t b : hits) {
    if (ref_[static_cast<size_t>(b)] > 0) --from_free;  // cached free hits still leave the list
  }
  if (from_free > free_count_) {
    return AllocResult::failure(OomReason::kCapacity, saturating_bytes(from_free, block_bytes_),
                                free_count_ * block_bytes_, free_count_ > 0 ? block_bytes_ : 0);
  }
  Req r;
  r.tokens = prompt_tokens;
  r.max_total = max_total_tokens;
  r.blocks.reserve(static_cast<size_t>(nblocks));
  for (int32_t b : hits) {
    if (ref_[static_cast<size_t>(b)] == 0) {
      unlink(b);
      filled_[static_cast<size_t>(b)] = static_cast<int32_t>(block_tokens_);
      live_tokens_ += block_tokens_;
    }
    ++ref_[static_cast<size_t>(b)];
    r.blocks.push_back(b);
  }
  prefix_hits_ += static_cast<int64_t>(hits.size());
  for (int64_t i = static_cast<int64_t>(hits.size()); i < nblocks; ++i) {
    const int32_t b = pop_free();
    ref_[static_cast<size_t>(b)] = 1;
    const int64_t fill = std::min(block_tokens_, prompt_tokens - i * block_tokens_);
    filled_[static_cast<size_t>(b)] = static_cast<int32_t>(fill);
    live_tokens_ += fill;
    if (i < static_cast<int64_t>(keys.size())) {  // a full hashed block: make it findable
      key_[static_cast<size_t>(b)] = keys[static_cast<size_t>(i)];
      by_key_[keys[static_cast<size_t>(i)]] = b;
    }
    r.blocks.push_back(b);
  }
  add_slack(r, +1);
  requests_.emplace(request, std::move(r));
  return AllocResult::success();
}

AllocResult PagedStore::grow(RequestId request, int64_t new_total_tokens) {
  auto it = requests_.find(request);
  KVSIM_CHECK(it != requests_.end(), "grow of request {} that holds no KV", request);
  Req& r = it->second;
  KVSIM_CHECK(new_total_tokens > r.tokens, "request {}: grow to {} from {}", request,
              new_total_tokens, r.tokens);
  const int64_t have = static_cast<int64_t>(r.blocks.size());
  const int64_t need = ceil_div(new_total_tokens, block_tokens_) - have;
  if (need > free_count_) {
    return AllocResult::failure(OomReason::kCapacity, saturating_bytes(need, block_bytes_),
                                free_count_ * block_bytes_, free_count_ > 0 ? block_bytes_ : 0);
  }
  add_slack(r, -1);
  // Fill the last block, then new ones. A shared (full) last block never has room.
  int64_t left = new_total_tokens - r.tokens;
  if (have > 0) {
    const int32_t last = r.blocks.back();
    const int64_t room = block_tokens_ - filled_[static_cast<size_t>(last)];
    const int64_t add = std::min(room, left);
    filled_[static_cast<size_t>(last)] += static_cast<int32_t>(add);
    live_tokens_ += add;
    left -= add;
  }
  for (int64_t i = 0; i < need; ++i) {
    const int32_t b = pop_free();
    ref_[static_cast<size_t>(b)] = 1;
    const int64_t add = std::min(block_tokens_, left);
    filled_[static_cast<size_t>(b)] = static_cast<int32_t>(add);
    live_tokens_ += add;
    left -= add;
    r.blocks.push_back(b);
  }
  r.tokens = new_total_tokens;
  add_slack(r, +1);
  return AllocResult::success();
}

void PagedStore::release(RequestId request) {
  auto it = requests_.find(request);
  KVSIM_CHECK(it != requests_.end(), "release of request {} that holds no KV", request);
  add_slack(it->second, -1);
  // Tail first, so the blocks with the longest prefixes are evicted first (vLLM v1).
  for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b) unref(*b);
  requests_.erase(it);
}

int64_t PagedStore::tokens(RequestId request) const {
  auto it = requests_.find(request);
  KVSIM_CHECK(it != requests_.end(), "request {} holds no KV", request);
  return it->second.tokens;
}

int64_t PagedStore::tokens_until_growth_allocates(RequestId request) const {
  auto it = requests_.find(request);
  KVSIM_CHECK(it != requests_.end(), "request {} holds no KV", request);
  return static_cast<int64_t>(it->second.blocks.size()) * block_tokens_ - it->second.tokens;
}

const std::vector<int32_t>& PagedStore::block_table(RequestId request) const {
  auto it = requests_.find(request);
  KVSIM_CHECK(it != requests_.end(), "request {} holds no KV", request);
  return it->second.blocks;
}

KvUsage PagedStore::usage() const {
  KvUsage u;
  u.live_bytes = live_tokens_ * bytes_per_token_;
  u.reservation_bytes = reservation_tokens_ * bytes_per_token_;
  u.internal_bytes = internal_tokens_ * bytes_per_token_;
  u.held_bytes = (num_blocks_ - free_count_) * block_bytes_;
  u.capacity_bytes = num_blocks_ * block_bytes_;
  u.free_bytes = free_count_ * block_bytes_;
  u.external_bytes = 0;  // every free block serves any request
  u.requests = static_cast<int64_t>(requests_.size());
  return u;
}

void PagedStore::check_invariants() const {
  // Reference counts equal the number of block-table entries; free list = blocks with ref 0.
  std::vector<int32_t> owners(static_cast<size_t>(num_blocks_), 0);
  int64_t reservation = 0, internal = 0;
  for (const auto& [id, r] : requests_) {
    KVSIM_CHECK(static_cast<int64_t>(r.blocks.size()) == ceil_div(r.tokens, block_tokens_),
                "request {} holds {} blocks for {} tokens", id, r.blocks.size(), r.tokens);
    for (int32_t b : r.blocks) ++owners[static_cast<size_t>(b)];
    const int64_t cap = static_cast<int64_t>(r.blocks.size()) * block_tokens_;
    const int64_t res = std::max<int64_t>(0, std::min(cap, r.max_total) - r.tokens);
    reservation += res;
    internal += cap - r.tokens - res;
    KVSIM_CHECK(cap - r.tokens < block_tokens_, "request {} wastes a whole block", id);
  }
  int64_t listed = 0;
  for (int32_t b = head_; b >= 0; b = next_[static_cast<size_t>(b)]) {
    KVSIM_CHECK(ref_[static_cast<size_t>(b)] == 0, "free-listed block {} has ref {}", b,
                ref_[static_cast<size_t>(b)]);
    KVSIM_CHECK(++listed <= num_blocks_, "free list has a cycle");
  }
  KVSIM_CHECK(listed == free_count_, "free list holds {} blocks, count says {}", listed,
              free_count_);
  int64_t live = 0, used = 0;
  for (int64_t b = 0; b < num_blocks_; ++b) {
    const auto i = static_cast<size_t>(b);
    KVSIM_CHECK(ref_[i] == owners[i], "block {} has ref {} but {} owners", b, ref_[i], owners[i]);
    if (ref_[i] > 0) {
      ++used;
      live += filled_[i];
      KVSIM_CHECK(ref_[i] == 1 || filled_[i] == block_tokens_, "shared block {} is not full", b);
    } else {
      KVSIM_CHECK(filled_[i] == 0, "free block {} still holds {} tokens", b, filled_[i]);
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
    KVSIM_CHECK(key_[static_cast<size_t>(b)] == key, "prefix key of block {} is stale", b);
  }
}

}  // namespace kvsim
