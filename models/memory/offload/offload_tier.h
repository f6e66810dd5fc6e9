// A KV tier under the GPU pool (CPU memory for vLLM's native offloading): a fixed number of
// offloaded blocks, each keyed by the prefix hash of its last token, evicted by LRU. It follows
// vLLM's LRUOffloadingManager (vllm/v1/kv_offload/lru_manager.py) call for call:
//   lookup         the run of leading keys that are stored and ready (a store completed)
//   touch          the keys become most recently used, the first one most of all
//   prepare_load   the keys are pinned (a reference each) while a load reads them
//   complete_load  the pins go
//   prepare_store  keys not stored yet get a block, evicting the least recently used unpinned
//                  ready blocks to make room; nullopt (nothing changes) when not enough can go
//   complete_store the stored keys become ready (found by lookup, evictable)
// A block being stored is neither found nor evicted (vLLM's BlockStatus ref_cnt -1 until ready).
// Accounting: every block that entered (stored_blocks) and left (evicted_blocks) is counted, and
// check_invariants() asks that their difference is the occupancy.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace kvsim {

// The key of offloaded block `i` (of `block_tokens` tokens) of a prompt with prefix `hashes`, one
// per `hash_block_tokens` tokens: the hash covering the block's last token, mixed with `i`
// (SplitMix64's finaliser). The tier, its connector and a router reading the tier's events
// (kv_events.h) all key a block this way. Requires: the hashes cover the block.
inline uint64_t offload_block_key(std::span<const uint64_t> hashes, int64_t hash_block_tokens,
                                  int64_t i, int64_t block_tokens) {
  const auto mix = [](uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  const int64_t last_token = (i + 1) * block_tokens - 1;
  const uint64_t h = hashes[static_cast<size_t>(last_token / hash_block_tokens)];
  return mix(h ^ mix(static_cast<uint64_t>(i)));
}

class OffloadTier {
 public:
  // Requires: capacity_blocks >= 0.
  explicit OffloadTier(int64_t capacity_blocks);

  int64_t lookup(std::span<const uint64_t> keys) const;
  void touch(std::span<const uint64_t> keys);
  // Requires: every key ready (lookup found it).
  void prepare_load(std::span<const uint64_t> keys);
  // Requires: every key pinned by prepare_load.
  void complete_load(std::span<const uint64_t> keys);

  struct StorePlan {
    std::vector<uint64_t> to_store;  // the keys given a block (not stored before), in order
    std::vector<uint64_t> evicted;   // the keys evicted for them, least recently used first
  };
  std::optional<StorePlan> prepare_store(std::span<const uint64_t> keys);
  // Requires: every key was given a block by prepare_store and is still stored.
  void complete_store(std::span<const uint64_t> keys);

  int64_t capacity_blocks() const { return capacity_; }
  int64_t occupied_blocks() const { return static_cast<int64_t>(index_.size()); }
  int64_t stored_blocks() const { return stored_; }    // blocks ever given a slot
  int64_t evicted_blocks() const { return evicted_; }  // blocks ever evicted
  bool contains(uint64_t key) const { return index_.count(key) != 0; }
  // Keys from least to most recently used (tests, the timeline).
  std::vector<uint64_t> lru_order() const { return {order_.begin(), order_.end()}; }
  // KVSIM_CHECK: stored - evicted == occupancy <= capacity; the index and the order agree.
  void check_invariants() const;

 private:
  struct Entry {
    std::list<uint64_t>::iterator pos;  // in order_
    int32_t pins = 0;                   // loads reading it
    bool ready = false;                 // its store completed
  };
  int64_t capacity_;
  std::list<uint64_t> order_;  // least recently used first
  std::unordered_map<uint64_t, Entry> index_;
  int64_t stored_ = 0;
  int64_t evicted_ = 0;
};

}  // namespace kvsim
