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
      pool_(pool) {
  KVSIM_CHECK(block_tokens >= 1 && !layout_.groups.empty() && pool.block_ids(),
              "hybrid KV coordinator: block_tokens {} groups {}", block_tokens,
              layout_.groups.size());
  managers_.reserve(layout_.groups.size());
  for (size_t g = 0; g < layout_.groups.size(); ++g) {
    bytes_per_token_ += layout_.group_bytes_per_token(g);
    managers_.emplace_back(layout_.groups[g], g, block_tokens, layout_.group_bytes_per_token(g),
                           pool);
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

HybridKvCoordinator::Req& HybridKvCoordinator::closed_req(RequestId request, const char* op) {
  Req& r = held_request(reqs_, request, op);
  KVSIM_CHECK(r.window < 0, "{}: request {} has its deferral window open (settle first)", op,
              request);
  return r;
}

const HybridKvCoordinator::Req& HybridKvCoordinator::closed_req(RequestId request,
                                                                const char* op) const {
  const Req& r = held_request(reqs_, request, op);
  KVSIM_CHECK(r.window < 0, "{}: request {} has its deferral window open (settle first)", op,
              request);
  return r;
}

void HybridKvCoordinator::add_reservation(const Req& r, int sign) {
  // A group's last block's slack up to max_total; the rest of the held bytes (slack past
  // max_total, padding layers) is internal. Live bytes follow the blocks (the managers).
  const int64_t cap = hybrid_ceil_div(r.tokens, block_tokens_) * block_tokens_;
  for (const KvGroupManager& m : managers_) {
    reservation_bytes_ +=
        sign * reservation_tokens(r.tokens, cap, r.max_total) * m.bytes_per_token();
  }
}

int64_t HybridKvCoordinator::new_blocks(const PrefixHashes& prefix, int64_t hits,
                                        const std::function<int64_t(size_t)>& table) const {
  const auto keys = [&](int64_t i) { return seq_key(prefix, i); };
  int64_t need = 0;
  for (size_t g = 0; g < managers_.size(); ++g) {
    need += managers_[g].blocks_to_allocate(keys, hits, table(g));
  }
  return need;
}

int64_t HybridKvCoordinator::blocks_to_allocate(const PrefixHashes& prefix, int64_t tokens) const {
  const int64_t table = hybrid_ceil_div(tokens, block_tokens_);
  return new_blocks(prefix, hit_blocks(prefix, tokens), [&](size_t) { return table; });
}

int64_t HybridKvCoordinator::admission_blocks(const PrefixHashes& prefix, int64_t tokens,
                                              int64_t batched) const {
  return new_blocks(prefix, hit_blocks(prefix, tokens), [&](size_t g) {
    return kv_group_admission_blocks(layout_.groups[g], tokens, block_tokens_, batched);
  });
}

AllocResult HybridKvCoordinator::allocate(RequestId request, int64_t prompt_tokens,
                                          int64_t max_total_tokens, const PrefixHashes& prefix) {
  KVSIM_CHECK(!holds(request), "request {} already holds KV", request);
  KVSIM_CHECK(prompt_tokens >= 1 && prompt_tokens <= max_total_tokens,
              "request {}: prompt {} max_total {}", request, prompt_tokens, max_total_tokens);
  const int64_t need = blocks_to_allocate(prefix, prompt_tokens);
  if (need > free_blocks()) return paged_capacity_failure(need, free_blocks(), block_bytes_);
  const int64_t hits = hit_blocks(prefix, prompt_tokens);
  Req& r = reqs_[request];
  r.tokens = prompt_tokens;
  r.max_total = max_total_tokens;
  r.tables.assign(managers_.size(), {});
  const auto keys = [&](int64_t i) { return seq_key(prefix, i); };
  for (size_t g = 0; g < managers_.size(); ++g) managers_[g].share_hits(r.tables[g], keys, hits);
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
  for (size_t g = 0; g < managers_.size(); ++g) {
    managers_[g].allocate_new_blocks(r.tables[g], prompt_tokens);
  }
  add_reservation(r, +1);
  key_full_blocks(r);
  return AllocResult::success();
}

int64_t HybridKvCoordinator::blocks_to_grow(RequestId request, int64_t tokens) const {
  const Req& r = held_req(request, "blocks_to_grow");
  if (tokens <= r.tokens) return 0;
  const int64_t table = hybrid_ceil_div(tokens, block_tokens_);
  int64_t need = 0, freed = 0;
  for (size_t g = 0; g < managers_.size(); ++g) {
    need += table - static_cast<int64_t>(r.tables[g].blocks.size());
    freed += managers_[g].frees_to_pool(r.tables[g], r.tokens);
  }
  return std::max<int64_t>(0, need - freed);
}

AllocResult HybridKvCoordinator::grow(RequestId request, int64_t new_total_tokens) {
  Req& r = closed_req(request, "grow");
  KVSIM_CHECK(new_total_tokens > r.tokens, "grow: request {} from {} to {} tokens", request,
              r.tokens, new_total_tokens);
  // vLLM's allocate_slots: the blocks that left each local group's window or chunk (of the
  // tokens computed so far) are freed first, then every group's table reaches the new length.
  const int64_t need = blocks_to_grow(request, new_total_tokens);
  if (need > free_blocks()) return paged_capacity_failure(need, free_blocks(), block_bytes_);
  add_reservation(r, -1);
  for (size_t g = 0; g < managers_.size(); ++g) {
    window_freed_ += managers_[g].remove_skipped_blocks(r.tables[g], r.tokens);
  }
  for (size_t g = 0; g < managers_.size(); ++g) {
    managers_[g].allocate_new_blocks(r.tables[g], new_total_tokens);
  }
  r.tokens = new_total_tokens;
  add_reservation(r, +1);
  key_full_blocks(r);
  return AllocResult::success();
}

void HybridKvCoordinator::release(RequestId request) {
  closed_req(request, "release");
  auto it = reqs_.find(request);
  add_reservation(it->second, -1);
  for (size_t g = 0; g < managers_.size(); ++g) managers_[g].free(it->second.tables[g]);
  reqs_.erase(it);
}

int64_t HybridKvCoordinator::tokens(RequestId request) const {
  return closed_req(request, "tokens").tokens;
}

int64_t HybridKvCoordinator::held_blocks(RequestId request, size_t g) const {
  const KvGroupManager::Table& t = held_req(request, "held_blocks").tables[g];
  return static_cast<int64_t>(t.blocks.size()) - t.skipped;
}

int64_t HybridKvCoordinator::held_blocks(RequestId request) const {
  int64_t n = 0;
  for (size_t g = 0; g < managers_.size(); ++g) n += held_blocks(request, g);
  return n;
}

const std::vector<int32_t>& HybridKvCoordinator::block_table(RequestId request, size_t g) const {
  return held_req(request, "block_table").tables[g].blocks;
}

int64_t HybridKvCoordinator::tokens_until_growth_allocates(RequestId request) const {
  // Every table has the same length: the slack of the last block.
  const Req& r = closed_req(request, "tokens_until_growth_allocates");
  return hybrid_ceil_div(r.tokens, block_tokens_) * block_tokens_ - r.tokens;
}

int64_t HybridKvCoordinator::window_frees(RequestId request, int64_t target) const {
  const Req& r = held_req(request, "window_frees");
  int64_t n = 0;
  for (size_t g = 0; g < managers_.size(); ++g) {
    n += managers_[g].frees_to_pool(r.tables[g], target - 1);
  }
  return n;
}

KvUsage HybridKvCoordinator::usage() const { return usage_with(0, 0); }

KvUsage HybridKvCoordinator::usage_with(int64_t tokens, int64_t crossings) const {
  // Every deferred token is live in every group and leaves its reservation; a crossing's block
  // in every group adds its other block_tokens - 1 slots to the reservation.
  const int64_t deferred = deferred_tokens_ + tokens;
  const auto groups = static_cast<int64_t>(managers_.size());
  KvUsage u;
  for (const KvGroupManager& m : managers_) u.live_bytes += m.live_tokens() * m.bytes_per_token();
  u.live_bytes += deferred * bytes_per_token_;
  u.reservation_bytes =
      reservation_bytes_ + (crossings * block_tokens_ - deferred) * bytes_per_token_;
  u.held_bytes = (num_blocks_ - free_blocks() + crossings * groups) * block_bytes_;
  u.internal_bytes = u.held_bytes - u.live_bytes - u.reservation_bytes;
  u.capacity_bytes = num_blocks_ * block_bytes_;
  u.free_bytes = (free_blocks() - crossings * groups) * block_bytes_;
  u.requests = static_cast<int64_t>(reqs_.size());
  return u;
}

void HybridKvCoordinator::check_invariants() const {
  KVSIM_CHECK(deferred_tokens_ == 0, "{} deferred tokens not settled", deferred_tokens_);
  for (const std::vector<int32_t>& c : crossed_) {
    KVSIM_CHECK(c.empty(), "{} crossed blocks not attributed", c.size());
  }
  int64_t reservation = 0;
  std::vector<int32_t> holders(static_cast<size_t>(num_blocks_), 0);
  for (const auto& [id, r] : reqs_) {
    const int64_t table = hybrid_ceil_div(r.tokens, block_tokens_);
    for (size_t g = 0; g < managers_.size(); ++g) {
      const KvGroupManager::Table& t = r.tables[g];
      KVSIM_CHECK(static_cast<int64_t>(t.blocks.size()) == table,
                  "request {} group {}: {} blocks, not {}", id, g, t.blocks.size(), table);
      managers_[g].check_table(t, r.tokens, holders);
      reservation += reservation_tokens(r.tokens, table * block_tokens_, r.max_total) *
                     managers_[g].bytes_per_token();
    }
  }
  for (size_t b = 0; b < holders.size(); ++b) {
    const int32_t ref = pool_.block(static_cast<int32_t>(b)).ref;
    KVSIM_CHECK(holders[b] == ref, "block {}: {} holders, ref {}", b, holders[b], ref);
  }
  KVSIM_CHECK(reservation == reservation_bytes_, "reservation {} vs {}", reservation,
              reservation_bytes_);
  pool_.check_invariants();
  for (const KvGroupManager& m : managers_) m.check_counts();
}

}  // namespace kvsim
