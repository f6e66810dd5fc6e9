// The offload tier's ARC policy (OffloadEviction::kArc), as vLLM's ARCOffloadingManager
// (vllm/v1/kv_offload/arc_manager.py) runs it:
//   T1     blocks stored and not touched since (new blocks enter here)
//   T2     blocks touched again while stored and ready (a touch moves a T1 block here)
//   B1/B2  ghosts: keys evicted from T1 / T2, at most `capacity` each, oldest dropped first
//   target T1's adaptive size: a touch of a B1 ghost raises it by max(1, |B2| / |B1|) (up to
//          the capacity), one of a B2 ghost lowers it by max(1, |B1| / |B2|) (down to 0)
// Eviction takes T1's least recently used evictable block while |T1| >= floor(target), else
// T2's. vLLM evicts as it searches and returns None when it runs out, leaving what it evicted
// gone; kvsim chooses every victim first and changes nothing when not enough can go, as its LRU
// tier does.
#include <algorithm>

#include "models/memory/offload/offload_tier.h"

namespace kvsim {

void OffloadTier::KeyList::push_back(uint64_t k) {
  order_.push_back(k);
  at_[k] = std::prev(order_.end());
}

void OffloadTier::KeyList::erase(uint64_t k) {
  auto f = at_.find(k);
  order_.erase(f->second);
  at_.erase(f);
}

void OffloadTier::KeyList::trim_to(size_t n) {
  while (order_.size() > n) {
    at_.erase(order_.front());
    order_.pop_front();
  }
}

void OffloadTier::arc_touch(uint64_t k) {
  auto f = index_.find(k);
  if (f != index_.end()) {
    Entry& e = f->second;
    if (e.frequent) {
      t2_.splice(t2_.end(), t2_, e.pos);
    } else if (!e.ready) {  // just prepared for a store: not a second use
      order_.splice(order_.end(), order_, e.pos);
    } else {
      t2_.splice(t2_.end(), order_, e.pos);
      e.frequent = true;
    }
    return;
  }
  const auto b1 = static_cast<double>(b1_.size());
  const auto b2 = static_cast<double>(b2_.size());
  if (b1_.contains(k)) {
    target_t1_ = std::min(target_t1_ + std::max(1.0, b2 / b1), static_cast<double>(capacity_));
    b1_.to_back(k);
  } else if (b2_.contains(k)) {
    target_t1_ = std::max(target_t1_ - std::max(1.0, b1 / b2), 0.0);
    b2_.to_back(k);
  }
}

std::optional<std::vector<uint64_t>> OffloadTier::arc_victims(int64_t need) const {
  std::vector<uint64_t> out;
  auto t1 = order_.begin();
  auto t2 = t2_.begin();
  auto t1_left = static_cast<int64_t>(order_.size());
  while (static_cast<int64_t>(out.size()) < need) {
    if (t1_left >= static_cast<int64_t>(target_t1_)) {
      while (t1 != order_.end() && !evictable(*t1)) ++t1;
      if (t1 != order_.end()) {
        out.push_back(*t1++);
        --t1_left;
        continue;
      }
    }
    while (t2 != t2_.end() && !evictable(*t2)) ++t2;
    if (t2 == t2_.end()) return std::nullopt;
    out.push_back(*t2++);
  }
  return out;
}

}  // namespace kvsim
