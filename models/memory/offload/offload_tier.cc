#include "models/memory/offload/offload_tier.h"

#include "core/check.h"

namespace kvsim {

OffloadTier::OffloadTier(int64_t capacity_blocks) : capacity_(capacity_blocks) {
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
  int64_t to_evict = static_cast<int64_t>(plan.to_store.size()) - (capacity_ - occupied_blocks());
  if (to_evict > 0) {
    for (const uint64_t k : order_) {
      const Entry& e = index_.at(k);
      if (!e.ready || e.pins > 0) continue;
      plan.evicted.push_back(k);
      if (--to_evict == 0) break;
    }
    if (to_evict > 0) return std::nullopt;  // vLLM skips the store: nothing changes
  }
  for (const uint64_t k : plan.evicted) {
    auto f = index_.find(k);
    order_.erase(f->second.pos);
    index_.erase(f);
    ++evicted_;
  }
  for (const uint64_t k : plan.to_store) {
    order_.push_back(k);
    index_.emplace(k, Entry{.pos = std::prev(order_.end())});
    ++stored_;
  }
  return plan;
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
  KVSIM_CHECK(order_.size() == index_.size(), "offload tier: {} in LRU order, {} indexed",
              order_.size(), index_.size());
}

}  // namespace kvsim
