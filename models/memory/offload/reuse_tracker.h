// Reuse gating of the offload tier's stores, as vLLM's FilteredOffloadingManager and
// BlockReuseTracker (vllm/v1/kv_offload/reuse_manager.py; kv_connector_extra_config
// `store_threshold`, `max_tracker_size`): every key a lookup of the tier walks is counted, in a
// table of at most `max_size` keys that forgets the least recently counted first; a block is
// stored only once its key was counted `threshold` times. A first-seen prefix is not offloaded,
// which saves the host link and the tier's room for prompts that are never repeated.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <utility>

namespace kvsim {

class ReuseTracker {
 public:
  // Requires: max_size >= 1.
  ReuseTracker(int64_t threshold, int64_t max_size) : threshold_(threshold), max_size_(max_size) {}

  void record(std::span<const uint64_t> keys) {
    for (const uint64_t k : keys) record(k);
  }
  void record(uint64_t k) {
    auto f = at_.find(k);
    if (f != at_.end()) {
      order_.splice(order_.end(), order_, f->second);
      ++f->second->second;
      return;
    }
    if (static_cast<int64_t>(order_.size()) >= max_size_) {
      at_.erase(order_.front().first);
      order_.pop_front();
    }
    order_.emplace_back(k, 1);
    at_[k] = std::prev(order_.end());
  }
  bool eligible(uint64_t k) const {
    auto f = at_.find(k);
    return (f == at_.end() ? 0 : f->second->second) >= threshold_;
  }
  int64_t count(uint64_t k) const {
    auto f = at_.find(k);
    return f == at_.end() ? 0 : f->second->second;
  }

 private:
  int64_t threshold_;
  int64_t max_size_;
  std::list<std::pair<uint64_t, int64_t>> order_;  // least recently counted first
  std::unordered_map<uint64_t, std::list<std::pair<uint64_t, int64_t>>::iterator> at_;
};

}  // namespace kvsim
