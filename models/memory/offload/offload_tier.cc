#include "models/memory/offload/offload_tier.h"

#include "core/check.h"

namespace kvsim {

OffloadTier::OffloadTier(int64_t capacity_blocks, OffloadEviction policy)
    : capacity_(capacity_blocks), policy_(policy) {
  KVSIM_CHECK(capacity_blocks >= 0, "an offload tier of {} blocks", capacity_blocks);
}

int64_t OffloadTier::lookup(std::span<const uint64_t> keys) const {
  int64_t hits = 0;
  for (const uint64_t k : keys) {
    auto f = index_.find(k);
    if (f == index_.end() || !f->second.ready) break;
    ++hits;
  }
  return hits;
}

void OffloadTier::touch(std::span<const uint64_t> keys) {
  // From the last key to the first, so that the first ends most recently used: a prefix's
  // leading blocks, shared by more requests, are evicted last (vLLM's touch walks reversed).
  for (auto k = keys.rbegin(); k != keys.rend(); ++k) {
    if (policy_ == OffloadEviction::kArc) {
      arc_touch(*k);
      continue;
    }
    auto f = index_.find(*k);
    if (f == index_.end()) continue;
    order_.splice(order_.end(), order_, f->second.pos);
  }
}

void OffloadTier::prepare_load(std::span<const uint64_t> keys) {
  for (const uint64_t k : keys) {
    auto f = index_.find(k);
    KVSIM_CHECK(f != index_.end() && f->second.ready, "loading offloaded block {:#x} not ready", k);
    ++f->second.pins;
  }
}

void OffloadTier::complete_load(std::span<const uint64_t> keys) {
  for (const uint64_t k : keys) {
    auto f = index_.find(k);
    KVSIM_CHECK(f != index_.end() && f->second.pins > 0, "offloaded block {:#x} was not loading",
                k);
    --f->second.pins;
  }
}

std::optional<OffloadTier::StorePlan> OffloadTier::prepare_store(std::span<const uint64_t> keys) {
  StorePlan plan;
  for (const uint64_t k : keys) {
    if (index_.count(k) == 0) plan.to_store.push_back(k);
  }
  const int64_t need = static_cast<int64_t>(plan.to_store.size()) - (capacity_ - occupied_blocks());
  if (need > 0) {
    auto victims = policy_ == OffloadEviction::kArc ? arc_victims(need) : lru_victims(need);
    if (!victims) return std::nullopt;  // vLLM skips the store: nothing changes
    plan.evicted = std::move(*victims);
  }
  for (const uint64_t k : plan.evicted) evict(k);
  if (policy_ == OffloadEviction::kArc) {  // the ghosts hold at most the capacity each
    b1_.trim_to(static_cast<size_t>(capacity_));
    b2_.trim_to(static_cast<size_t>(capacity_));
  }
  for (const uint64_t k : plan.to_store) {
    order_.push_back(k);  // (ARC: new blocks enter T1 and leave the ghosts)
    index_.emplace(k, Entry{.pos = std::prev(order_.end())});
    ++stored_;
    if (b1_.contains(k)) b1_.erase(k);
    if (b2_.contains(k)) b2_.erase(k);
  }
  return plan;
}

std::optional<std::vector<uint64_t>> OffloadTier::lru_victims(int64_t need) const {
  std::vector<uint64_t> out;
  for (const uint64_t k : order_) {
    if (!evictable(k)) continue;
    out.push_back(k);
    if (static_cast<int64_t>(out.size()) == need) return out;
  }
  return std::nullopt;
}

void OffloadTier::evict(uint64_t k) {
  auto f = index_.find(k);
  const bool frequent = f->second.frequent;
  (frequent ? t2_ : order_).erase(f->second.pos);
  index_.erase(f);
  ++evicted_;
  if (policy_ == OffloadEviction::kArc) (frequent ? b2_ : b1_).push_back(k);
}

void OffloadTier::complete_store(std::span<const uint64_t> keys) {
  for (const uint64_t k : keys) {
    auto f = index_.find(k);
    KVSIM_CHECK(f != index_.end(), "completing the store of offloaded block {:#x}, not stored", k);
    f->second.ready = true;
  }
}

void OffloadTier::check_invariants() const {
  KVSIM_CHECK(stored_ - evicted_ == occupied_blocks(),
              "offload tier: {} blocks stored - {} evicted != {} held", stored_, evicted_,
              occupied_blocks());
  KVSIM_CHECK(occupied_blocks() <= capacity_, "offload tier holds {} blocks of {}",
              occupied_blocks(), capacity_);
  KVSIM_CHECK(order_.size() + t2_.size() == index_.size(),
              "offload tier: {} + {} in recency order, {} indexed", order_.size(), t2_.size(),
              index_.size());
}

}  // namespace kvsim
