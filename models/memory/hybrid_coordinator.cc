#include "models/memory/hybrid_coordinator.h"

#include <algorithm>

#include "core/check.h"
#include "models/memory/block_keys.h"
#include "models/memory/store_accounts.h"

namespace kvsim {

namespace {
int64_t hybrid_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

HybridKvCoordinator::HybridKvCoordinator(KvGroupLayout layout, int64_t block_tokens,
                                         BlockPool& pool, bool prefix_caching)
    : layout_(std::move(layout)),
      block_tokens_(block_tokens),
      num_blocks_(pool.num_blocks()),
      block_bytes_(layout_.block_bytes(block_tokens)),
      bytes_per_token_(0),
      prefix_caching_(prefix_caching),
      pool_(pool),
      group_held_(layout_.groups.size(), 0) {
  KVSIM_CHECK(block_tokens >= 1 && !layout_.groups.empty() && pool.block_ids(),
              "hybrid KV coordinator: block_tokens {} groups {}", block_tokens,
              layout_.groups.size());
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    bytes_per_token_ += layout_.group_bytes_per_token(g);
    // Attention types in the layout's order (kv_group_layout puts full attention first, as
    // vLLM's coordinator checks it first); a type's groups are consecutive.
    if (g == 0 || layout_.groups[g].kind != layout_.groups[g - 1].kind) types_.emplace_back();
    types_.back().push_back(g);
  }
}

const HybridKvCoordinator::Req& HybridKvCoordinator::held_req(RequestId request,
                                                              const char* op) const {
  return held_request(reqs_, request, op);
}

int64_t HybridKvCoordinator::frees(const Req& r, size_t g, int64_t computed) const {
  const int64_t want = kv_group_skipped_blocks(layout_.groups[g], computed, block_tokens_);
  const auto table = static_cast<int64_t>(r.tables[g].size());
  return std::max<int64_t>(0, std::min(want, table) - r.skipped[g]);
}

int64_t HybridKvCoordinator::frees_to_pool(const Req& r, size_t g, int64_t computed) const {
  const int64_t n = frees(r, g, computed);
  int64_t back = 0;
  for (int64_t i = r.skipped[g]; i < r.skipped[g] + n; ++i) {
    back += pool_.block(r.tables[g][static_cast<size_t>(i)]).ref == 1;
  }
  return back;
}

void HybridKvCoordinator::add_reservation(const Req& r, int sign) {
  // A group's last block's slack up to max_total; the rest of the held bytes (slack past
  // max_total, padding layers) is internal. Live bytes follow the blocks (set_filled).
  const int64_t cap = hybrid_ceil_div(r.tokens, block_tokens_) * block_tokens_;
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    reservation_bytes_ +=
        sign * reservation_tokens(r.tokens, cap, r.max_total) * layout_.group_bytes_per_token(g);
  }
}

int64_t HybridKvCoordinator::group_blocks_to_allocate(const PrefixHashes& prefix, size_t g,
                                                      int64_t hits, int64_t table) const {
  // vLLM: max(required - max(skipped, hits), 0), and the hits inside the window or chunk that
  // sit on the free list (taking them takes free blocks). The skipped ones are never touched.
  const int64_t skipped = std::min(
      hits, kv_group_skipped_blocks(layout_.groups[g], hits * block_tokens_, block_tokens_));
  int64_t evictable = 0;
  for (int64_t i = skipped; i < hits; ++i) {
    evictable += pool_.block(hit_block(prefix, g, i)).ref == 0;
  }
  return std::max<int64_t>(0, table - hits) + evictable;
}

int64_t HybridKvCoordinator::blocks_to_allocate(const PrefixHashes& prefix, int64_t tokens) const {
  const int64_t hits = hit_blocks(prefix, tokens);
  int64_t need = 0;
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    need += group_blocks_to_allocate(prefix, g, hits, hybrid_ceil_div(tokens, block_tokens_));
  }
  return need;
}

int64_t HybridKvCoordinator::admission_blocks(const PrefixHashes& prefix, int64_t tokens,
                                              int64_t batched) const {
  const int64_t hits = hit_blocks(prefix, tokens);
  int64_t need = 0;
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    const int64_t capped =
        kv_group_admission_blocks(layout_.groups[g], tokens, block_tokens_, batched);
    need += group_blocks_to_allocate(prefix, g, hits, capped);
  }
  return need;
}

AllocResult HybridKvCoordinator::allocate(RequestId request, int64_t prompt_tokens,
                                          int64_t max_total_tokens, const PrefixHashes& prefix) {
  KVSIM_CHECK(!holds(request), "request {} already holds KV", request);
  KVSIM_CHECK(prompt_tokens >= 1 && prompt_tokens <= max_total_tokens,
              "request {}: prompt {} max_total {}", request, prompt_tokens, max_total_tokens);
  const int64_t need = blocks_to_allocate(prefix, prompt_tokens);
  if (need > free_blocks()) {
    return paged_capacity_failure(need, free_blocks(), block_bytes_);
  }
  const int64_t hits = hit_blocks(prefix, prompt_tokens);
  const size_t groups = layout_.groups.size();
  Req& r = reqs_[request];
  r.tokens = prompt_tokens;
  r.max_total = max_total_tokens;
  r.tables.assign(groups, {});
  r.skipped.assign(groups, 0);
  for (size_t g = 0; g < groups; ++g) {
    // The hit's blocks before the group's window or chunk stay with the null block
    // (allocate_new_computed_blocks); those inside it are shared.
    r.skipped[g] = std::min(
        hits, kv_group_skipped_blocks(layout_.groups[g], hits * block_tokens_, block_tokens_));
    r.tables[g].assign(static_cast<size_t>(r.skipped[g]), -1);
    for (int64_t i = r.skipped[g]; i < hits; ++i) {
      const int32_t b = hit_block(prefix, g, i);
      touch(b);
      r.tables[g].push_back(b);
    }
  }
  prefix_hits_ += hits;
  r.keyed = static_cast<size_t>(hits);  // hit blocks carry their keys
  r.owner = prefix_caching_ ? prefix.owner : -1;
  r.keys.clear();
  if (prefix_caching_) {
    for (int64_t i = 0, n = keyable_prefix_blocks(prefix, prompt_tokens, block_tokens_); i < n;
         ++i) {
      r.keys.push_back(seq_key(prefix, i));
    }
  }
  for (size_t g = 0; g < groups; ++g) extend_table(r, g, prompt_tokens);
  add_reservation(r, +1);
  key_full_blocks(r);
  return AllocResult::success();
}

void HybridKvCoordinator::extend_table(Req& r, size_t g, int64_t tokens) {
  std::vector<int32_t>& t = r.tables[g];
  if (!t.empty() && t.back() >= 0) {  // its last block's room fills first
    const auto last = static_cast<int64_t>(t.size()) - 1;
    set_filled(t.back(), std::min(block_tokens_, tokens - last * block_tokens_));
  }
  for (auto i = static_cast<int64_t>(t.size()); i < hybrid_ceil_div(tokens, block_tokens_); ++i) {
    const int32_t b = pop_free(g);
    set_filled(b, std::min(block_tokens_, tokens - i * block_tokens_));
    t.push_back(b);
  }
}

int64_t HybridKvCoordinator::blocks_to_grow(RequestId request, int64_t tokens) const {
  const Req& r = held_req(request, "blocks_to_grow");
  if (tokens <= r.tokens) return 0;
  const int64_t table = hybrid_ceil_div(tokens, block_tokens_);
  int64_t need = 0, freed = 0;
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    need += table - static_cast<int64_t>(r.tables[g].size());
    freed += frees_to_pool(r, g, r.tokens);
  }
  return std::max<int64_t>(0, need - freed);
}

void HybridKvCoordinator::skip_blocks(Req& r, size_t g) {
  const int64_t n = frees(r, g, r.tokens);
  // Newest first, as remove_skipped_blocks hands them to the pool.
  for (int64_t i = r.skipped[g] + n - 1; i >= r.skipped[g]; --i) {
    int32_t& b = r.tables[g][static_cast<size_t>(i)];
    unref(b);
    b = -1;
  }
  r.skipped[g] += n;
  window_freed_ += n;
}

AllocResult HybridKvCoordinator::grow(RequestId request, int64_t new_total_tokens) {
  auto it = reqs_.find(request);
  KVSIM_CHECK(it != reqs_.end(), "grow: request {} holds no KV", request);
  Req& r = it->second;
  KVSIM_CHECK(new_total_tokens > r.tokens, "grow: request {} from {} to {} tokens", request,
              r.tokens, new_total_tokens);
  // vLLM's allocate_slots: the blocks that left each local group's window or chunk (of the
  // tokens computed so far) are freed first, then every group's table reaches the new length.
  const int64_t need = blocks_to_grow(request, new_total_tokens);
  if (need > free_blocks()) {
    return paged_capacity_failure(need, free_blocks(), block_bytes_);
  }
  add_reservation(r, -1);
  for (size_t g = 0; g < layout_.groups.size(); ++g) skip_blocks(r, g);
  for (size_t g = 0; g < layout_.groups.size(); ++g) extend_table(r, g, new_total_tokens);
  r.tokens = new_total_tokens;
  add_reservation(r, +1);
  key_full_blocks(r);
  return AllocResult::success();
}

void HybridKvCoordinator::release(RequestId request) {
  auto it = reqs_.find(request);
  KVSIM_CHECK(it != reqs_.end(), "release: request {} holds no KV", request);
  add_reservation(it->second, -1);
  // Each group's blocks in reverse order, so that a prefix's tail is evicted before its head
  // (SingleTypeKVCacheManager.free).
  for (const std::vector<int32_t>& t : it->second.tables) {
    for (auto b = t.rbegin(); b != t.rend() && *b >= 0; ++b) unref(*b);
  }
  reqs_.erase(it);
}

int64_t HybridKvCoordinator::tokens(RequestId request) const {
  return held_req(request, "tokens").tokens;
}

int64_t HybridKvCoordinator::held_blocks(RequestId request, size_t g) const {
  const Req& r = held_req(request, "held_blocks");
  return static_cast<int64_t>(r.tables[g].size()) - r.skipped[g];
}

int64_t HybridKvCoordinator::held_blocks(RequestId request) const {
  int64_t n = 0;
  for (size_t g = 0; g < layout_.groups.size(); ++g) n += held_blocks(request, g);
  return n;
}

const std::vector<int32_t>& HybridKvCoordinator::block_table(RequestId request, size_t g) const {
  return held_req(request, "block_table").tables[g];
}

int64_t HybridKvCoordinator::tokens_until_growth_allocates(RequestId request) const {
  // Every table has the same length: the slack of the last block.
  const Req& r = held_req(request, "tokens_until_growth_allocates");
  return hybrid_ceil_div(r.tokens, block_tokens_) * block_tokens_ - r.tokens;
}

int64_t HybridKvCoordinator::window_frees(RequestId request, int64_t target) const {
  const Req& r = held_req(request, "window_frees");
  int64_t n = 0;
  for (size_t g = 0; g < layout_.groups.size(); ++g) n += frees_to_pool(r, g, target - 1);
  return n;
}

KvUsage HybridKvCoordinator::usage() const {
  KvUsage u;
  u.live_bytes = live_bytes_;
  u.reservation_bytes = reservation_bytes_;
  u.held_bytes = (num_blocks_ - free_blocks()) * block_bytes_;
  u.internal_bytes = u.held_bytes - u.live_bytes - u.reservation_bytes;
  u.capacity_bytes = num_blocks_ * block_bytes_;
  u.free_bytes = free_blocks() * block_bytes_;
  u.requests = static_cast<int64_t>(reqs_.size());
  return u;
}

void HybridKvCoordinator::check_invariants() const {
  int64_t reservation = 0;
  std::vector<int32_t> refs(static_cast<size_t>(num_blocks_), 0);
  for (const auto& [id, r] : reqs_) {
    const int64_t table = hybrid_ceil_div(r.tokens, block_tokens_);
    for (size_t g = 0; g < layout_.groups.size(); ++g) {
      const std::vector<int32_t>& t = r.tables[g];
      KVSIM_CHECK(static_cast<int64_t>(t.size()) == table, "request {} group {}: {} blocks, not {}",
                  id, g, t.size(), table);
      KVSIM_CHECK(
          r.skipped[g] <= kv_group_skipped_blocks(layout_.groups[g], r.tokens, block_tokens_),
          "request {} group {}: {} blocks freed inside its window", id, g, r.skipped[g]);
      for (size_t i = 0; i < t.size(); ++i) {
        const bool freed = static_cast<int64_t>(i) < r.skipped[g];
        KVSIM_CHECK(freed == (t[i] < 0), "request {} group {}: entry {} is {}", id, g, i, t[i]);
        if (t[i] >= 0) {
          ++refs[static_cast<size_t>(t[i])];
          KVSIM_CHECK(pool_.block(t[i]).group == static_cast<int32_t>(g),
                      "block {} of group {} in group {}'s table", t[i], pool_.block(t[i]).group, g);
        }
      }
      reservation += reservation_tokens(r.tokens, table * block_tokens_, r.max_total) *
                     layout_.group_bytes_per_token(g);
    }
  }
  for (size_t b = 0; b < refs.size(); ++b) {
    KVSIM_CHECK(refs[b] == pool_.block(static_cast<int32_t>(b)).ref, "block {}: {} holders, ref {}",
                b, refs[b], pool_.block(static_cast<int32_t>(b)).ref);
  }
  KVSIM_CHECK(reservation == reservation_bytes_, "reservation {} vs {}", reservation,
              reservation_bytes_);
  check_blocks();
}

}  // namespace kvsim
