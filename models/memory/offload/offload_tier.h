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

// The eviction policy: vLLM's kv_connector_extra_config `eviction_policy` (lru, arc).
enum class OffloadEviction { kLru, kArc };

class OffloadTier {
 public:
  // Requires: capacity_blocks >= 0.
  explicit OffloadTier(int64_t capacity_blocks, OffloadEviction policy = OffloadEviction::kLru);

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
  // Keys from least to most recently used (tests, the timeline); with ARC, T1's (seen once).
  std::vector<uint64_t> lru_order() const { return {order_.begin(), order_.end()}; }
  // ARC's other lists, least recently used first: T2 (blocks touched again), the ghosts B1 and
  // B2 (keys evicted from T1 and T2), and T1's adaptive target size.
  std::vector<uint64_t> arc_t2() const { return {t2_.begin(), t2_.end()}; }
  std::vector<uint64_t> arc_b1() const { return b1_.keys(); }
  std::vector<uint64_t> arc_b2() const { return b2_.keys(); }
  double arc_target_t1() const { return target_t1_; }
  // KVSIM_CHECK: stored - evicted == occupancy <= capacity; the index and the order agree.
  void check_invariants() const;

 private:
  struct Entry {
    std::list<uint64_t>::iterator pos;  // in order_ (or t2_ when frequent)
    int32_t pins = 0;                   // loads reading it
    bool ready = false;                 // its store completed
    bool frequent = false;              // ARC: in T2
  };
  // An ordered set of keys (ARC's ghost lists): least recently added or touched first.
  class KeyList {
   public:
    bool contains(uint64_t k) const { return at_.count(k) != 0; }
    size_t size() const { return order_.size(); }
    void push_back(uint64_t k);
    void to_back(uint64_t k) { order_.splice(order_.end(), order_, at_.at(k)); }
    void erase(uint64_t k);
    void trim_to(size_t n);  // drops the oldest keys past n
    std::vector<uint64_t> keys() const { return {order_.begin(), order_.end()}; }

   private:
    std::list<uint64_t> order_;
    std::unordered_map<uint64_t, std::list<uint64_t>::iterator> at_;
  };
  bool evictable(uint64_t k) const {
    const Entry& e = index_.at(k);
    return e.ready && e.pins == 0;
  }
  // The keys to evict for `need` slots, LRU or ARC; nullopt when not enough can go.
  std::optional<std::vector<uint64_t>> lru_victims(int64_t need) const;
  std::optional<std::vector<uint64_t>> arc_victims(int64_t need) const;
  void evict(uint64_t k);  // out of the tier (ARC: into its ghost list)
  void arc_touch(uint64_t k);

  int64_t capacity_;
  OffloadEviction policy_;
  std::list<uint64_t> order_;  // least recently used first (ARC's T1)
  std::list<uint64_t> t2_;     // ARC's T2
  KeyList b1_, b2_;            // ARC's ghosts
  double target_t1_ = 0;       // ARC's target size of T1
  std::unordered_map<uint64_t, Entry> index_;
  int64_t stored_ = 0;
  int64_t evicted_ = 0;
};

}  // namespace kvsim
