#include "models/memory/hybrid_paged_store.h"

#include <algorithm>

#include "core/check.h"
#include "models/memory/store_accounts.h"

namespace kvsim {

namespace {
int64_t hybrid_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

HybridPagedStore::HybridPagedStore(KvGroupLayout layout, int64_t block_tokens, int64_t num_blocks)
    : layout_(std::move(layout)),
      block_tokens_(block_tokens),
      num_blocks_(num_blocks),
      block_bytes_(layout_.block_bytes(block_tokens)),
      bytes_per_token_(0),
      free_(num_blocks),
      group_held_(layout_.groups.size(), 0) {
  KVSIM_CHECK(block_tokens >= 1 && num_blocks >= 1 && !layout_.groups.empty(),
              "hybrid paged store: block_tokens {} num_blocks {} groups {}", block_tokens,
              num_blocks, layout_.groups.size());
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    bytes_per_token_ += layout_.group_bytes_per_token(g);
  }
}

const HybridPagedStore::Req& HybridPagedStore::held_req(RequestId request, const char* op) const {
  auto it = reqs_.find(request);
  KVSIM_CHECK(it != reqs_.end(), "{}: request {} holds no KV", op, request);
  return it->second;
}

int64_t HybridPagedStore::frees(const Req& r, size_t g, int64_t computed) const {
  const int64_t want = kv_group_skipped_blocks(layout_.groups[g], computed, block_tokens_);
  return std::max<int64_t>(0, std::min(want, r.skipped[g] + r.held[g]) - r.skipped[g]);
}

void HybridPagedStore::account(const Req& r, int sign) {
  // Per group: live = the tokens in its held blocks; reservation = its last block's slack up to
  // max_total; the rest of the held bytes (slack past max_total, padding layers) is internal.
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    const int64_t per_token = layout_.group_bytes_per_token(g);
    const int64_t first = r.skipped[g] * block_tokens_;
    const int64_t cap = (r.skipped[g] + r.held[g]) * block_tokens_;
    live_bytes_ += sign * std::max<int64_t>(0, r.tokens - first) * per_token;
    reservation_bytes_ += sign * reservation_tokens(r.tokens, cap, r.max_total) * per_token;
    group_held_[g] += sign * r.held[g];
  }
}

int64_t HybridPagedStore::blocks_to_allocate(const PrefixHashes& prefix, int64_t tokens) const {
  (void)prefix;
  return static_cast<int64_t>(layout_.groups.size()) * hybrid_ceil_div(tokens, block_tokens_);
}

int64_t HybridPagedStore::admission_blocks(const PrefixHashes& prefix, int64_t tokens,
                                           int64_t batched) const {
  (void)prefix;
  int64_t need = 0;
  for (const KvGroup& g : layout_.groups) {
    need += kv_group_admission_blocks(g, tokens, block_tokens_, batched);
  }
  return need;
}

AllocResult HybridPagedStore::allocate(RequestId request, int64_t prompt_tokens,
                                       int64_t max_total_tokens, const PrefixHashes& prefix) {
  KVSIM_CHECK(!holds(request), "request {} already holds KV", request);
  KVSIM_CHECK(prompt_tokens >= 1 && prompt_tokens <= max_total_tokens,
              "request {}: prompt {} max_total {}", request, prompt_tokens, max_total_tokens);
  const int64_t need = blocks_to_allocate(prefix, prompt_tokens);
  if (need > free_) {
    return AllocResult::failure(OomReason::kCapacity, need * block_bytes_, free_ * block_bytes_,
                                free_ > 0 ? block_bytes_ : 0);
  }
  const size_t groups = layout_.groups.size();
  Req r{prompt_tokens, max_total_tokens,
        std::vector<int64_t>(groups, hybrid_ceil_div(prompt_tokens, block_tokens_)),
        std::vector<int64_t>(groups, 0)};  // nothing computed yet: every block is needed
  free_ -= need;
  account(r, +1);
  reqs_.emplace(request, std::move(r));
  return AllocResult::success();
}

int64_t HybridPagedStore::blocks_to_grow(RequestId request, int64_t tokens) const {
  const Req& r = held_req(request, "blocks_to_grow");
  if (tokens <= r.tokens) return 0;
  const int64_t table = hybrid_ceil_div(tokens, block_tokens_);
  int64_t need = 0, freed = 0;
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    need += table - (r.skipped[g] + r.held[g]);
    freed += frees(r, g, r.tokens);
  }
  return std::max<int64_t>(0, need - freed);
}

AllocResult HybridPagedStore::grow(RequestId request, int64_t new_total_tokens) {
  auto it = reqs_.find(request);
  KVSIM_CHECK(it != reqs_.end(), "grow: request {} holds no KV", request);
  Req& r = it->second;
  KVSIM_CHECK(new_total_tokens > r.tokens, "grow: request {} from {} to {} tokens", request,
              r.tokens, new_total_tokens);
  // vLLM's allocate_slots: the blocks that left each local group's window or chunk (of the
  // tokens computed so far) are freed first, then every group's table reaches the new length.
  const int64_t need = blocks_to_grow(request, new_total_tokens);
  if (need > free_) {
    return AllocResult::failure(OomReason::kCapacity, need * block_bytes_, free_ * block_bytes_,
                                free_ > 0 ? block_bytes_ : 0);
  }
  account(r, -1);
  const int64_t table = hybrid_ceil_div(new_total_tokens, block_tokens_);
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    const int64_t f = frees(r, g, r.tokens);
    r.held[g] -= f;
    r.skipped[g] += f;
    free_ += f;
    window_freed_ += f;
    const int64_t add = table - (r.skipped[g] + r.held[g]);
    r.held[g] += add;
    free_ -= add;
  }
  r.tokens = new_total_tokens;
  account(r, +1);
  return AllocResult::success();
}

void HybridPagedStore::release(RequestId request) {
  auto it = reqs_.find(request);
  KVSIM_CHECK(it != reqs_.end(), "release: request {} holds no KV", request);
  account(it->second, -1);
  for (int64_t h : it->second.held) free_ += h;
  reqs_.erase(it);
}

int64_t HybridPagedStore::tokens(RequestId request) const {
  return held_req(request, "tokens").tokens;
}

int64_t HybridPagedStore::held_blocks(RequestId request, size_t g) const {
  return held_req(request, "held_blocks").held[g];
}

int64_t HybridPagedStore::held_blocks(RequestId request) const {
  int64_t n = 0;
  for (int64_t b : held_req(request, "held_blocks").held) n += b;
  return n;
}

int64_t HybridPagedStore::tokens_until_growth_allocates(RequestId request) const {
  // Every table has the same length: the slack of the last block.
  const Req& r = held_req(request, "tokens_until_growth_allocates");
  return hybrid_ceil_div(r.tokens, block_tokens_) * block_tokens_ - r.tokens;
}

int64_t HybridPagedStore::window_frees(RequestId request, int64_t target) const {
  const Req& r = held_req(request, "window_frees");
  int64_t n = 0;
  for (size_t g = 0; g < layout_.groups.size(); ++g) n += frees(r, g, target - 1);
  return n;
}

KvUsage HybridPagedStore::usage() const {
  KvUsage u;
  u.live_bytes = live_bytes_;
  u.reservation_bytes = reservation_bytes_;
  u.held_bytes = (num_blocks_ - free_) * block_bytes_;
  u.internal_bytes = u.held_bytes - u.live_bytes - u.reservation_bytes;
  u.capacity_bytes = num_blocks_ * block_bytes_;
  u.free_bytes = free_ * block_bytes_;
  u.requests = static_cast<int64_t>(reqs_.size());
  return u;
}

void HybridPagedStore::check_invariants() const {
  int64_t held = 0, live = 0, reservation = 0;
  std::vector<int64_t> per_group(layout_.groups.size(), 0);
  for (const auto& [id, r] : reqs_) {
    const int64_t table = hybrid_ceil_div(r.tokens, block_tokens_);
    for (size_t g = 0; g < layout_.groups.size(); ++g) {
      KVSIM_CHECK(r.held[g] >= 0 && r.skipped[g] + r.held[g] == table,
                  "request {} group {}: {} skipped + {} held != {} blocks", id, g, r.skipped[g],
                  r.held[g], table);
      KVSIM_CHECK(r.skipped[g] <= kv_group_skipped_blocks(layout_.groups[g], r.tokens,
                                                          block_tokens_),
                  "request {} group {}: {} blocks freed inside its window", id, g, r.skipped[g]);
      const int64_t per_token = layout_.group_bytes_per_token(g);
      live += std::max<int64_t>(0, r.tokens - r.skipped[g] * block_tokens_) * per_token;
      reservation += reservation_tokens(r.tokens, table * block_tokens_, r.max_total) * per_token;
      held += r.held[g];
      per_group[g] += r.held[g];
    }
  }
  KVSIM_CHECK(held + free_ == num_blocks_, "{} held + {} free != {} blocks", held, free_,
              num_blocks_);
  KVSIM_CHECK(live == live_bytes_ && reservation == reservation_bytes_,
              "live {} vs {}, reservation {} vs {}", live, live_bytes_, reservation,
              reservation_bytes_);
  KVSIM_CHECK(per_group == group_held_, "per-group held blocks disagree");
}

}  // namespace kvsim
