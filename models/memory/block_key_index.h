// The prefix-key index of a BlockPool (block_pool.h): key -> a block id, for at most a fixed
// number of keys (a pool never indexes more keys than it has blocks). An open-addressing table
// with linear probing, sized once to a power of two at least twice that number, so it never
// rehashes and a probe is a multiply, a shift and (mostly) one cache line. A session workload
// indexes and evicts every block of every turn's history; std::unordered_map spent most of such
// a run in its prime-modulo bucket walk (bench/README.md, "Sessions against independent
// requests"). Key 0 is the empty slot (the pool's "no key"). Erasure shifts the probe run back
// over the hole (no tombstones), so lookups never slow down with churn.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kvsim {

class BlockKeyIndex {
 public:
  // Room for `max_keys` keys; the table is allocated at the first insertion.
  explicit BlockKeyIndex(int64_t max_keys) : max_keys_(max_keys) {}

  // key's value, or nullptr. Requires: key != 0.
  int32_t* find(uint64_t key) {
    if (slots_.empty()) return nullptr;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == 0) return nullptr;
    }
  }
  const int32_t* find(uint64_t key) const { return const_cast<BlockKeyIndex*>(this)->find(key); }

  // key's value, inserting `value` for it when absent (then `second` is true). Requires:
  // key != 0 and fewer than max_keys keys when absent.
  std::pair<int32_t*, bool> try_emplace(uint64_t key, int32_t value) {
    if (slots_.empty()) allocate();
    size_t i = home(key);
    for (; slots_[i].key != 0; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return {&slots_[i].value, false};
    }
    slots_[i] = {key, value};
    ++size_;
    return {&slots_[i].value, true};
  }

  // Removes key. Requires: key is present.
  void erase(uint64_t key) {
    size_t hole = home(key);
    while (slots_[hole].key != key) hole = (hole + 1) & mask_;
    // Backward shift: each later entry of the run that may live in the hole (its home is not
    // between the hole and it) moves there, leaving its own slot the next hole.
    for (size_t j = (hole + 1) & mask_; slots_[j].key != 0; j = (j + 1) & mask_) {
      if (((j - home(slots_[j].key)) & mask_) >= ((j - hole) & mask_)) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = Slot{};
    --size_;
  }

  int64_t size() const { return size_; }
  // f(key, value) for every key, in table order.
  template <class F>
  void for_each(F f) const {
    for (const Slot& s : slots_) {
      if (s.key != 0) f(s.key, s.value);
    }
  }

 private:
  struct Slot {
    uint64_t key = 0;
    int32_t value = -1;
  };
  void allocate() {
    const auto n = std::bit_ceil(static_cast<uint64_t>(2 * std::max<int64_t>(max_keys_, 1)));
    slots_.assign(n, Slot{});
    mask_ = n - 1;
    shift_ = 64 - std::countr_zero(n);
  }
  // Fibonacci hashing: the top bits of key x 2^64 / phi.
  size_t home(uint64_t key) const {
    return shift_ >= 64 ? 0 : static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }

  int64_t max_keys_;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  int64_t size_ = 0;
};

}  // namespace kvsim
