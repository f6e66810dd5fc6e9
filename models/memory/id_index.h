// IdIndex: request id -> dense slot number, an open-addressing hash table (linear probing,
// backward-shift deletion, no tombstones). The stores and the engine look a request up for every
// sequence of every iteration; std::unordered_map costs a modulo and a pointer chase per lookup,
// while this table holds only the live requests (a few hundred to a few thousand), so it stays
// in cache and a lookup is a multiply, a shift and one or two probes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvsim {

class IdIndex {
 public:
  static constexpr int32_t kNone = -1;

  IdIndex() { rehash(16); }

  // The slot of `id`, or kNone.
  int32_t find(int64_t id) const {
    for (size_t i = home(id);; i = (i + 1) & mask_) {
      const Entry& e = table_[i];
      if (e.slot == kNone) return kNone;
      if (e.id == id) return e.slot;
    }
  }

  // Requires: `id` absent, slot >= 0.
  void insert(int64_t id, int32_t slot) {
    if ((size_ + 1) * 2 > table_.size()) rehash(table_.size() * 2);
    size_t i = home(id);
    while (table_[i].slot != kNone) i = (i + 1) & mask_;
    table_[i] = Entry{id, slot};
    ++size_;
  }

  // Removes `id`; false when it was absent.
  bool erase(int64_t id) {
    size_t i = home(id);
    while (true) {
      if (table_[i].slot == kNone) return false;
      if (table_[i].id == id) break;
      i = (i + 1) & mask_;
    }
    // Backward shift: pull later entries of the probe run into the hole unless that would move
    // one in front of its home position.
    for (size_t j = (i + 1) & mask_; table_[j].slot != kNone; j = (j + 1) & mask_) {
      const size_t h = home(table_[j].id);
      if (((j - h) & mask_) >= ((j - i) & mask_)) {
        table_[i] = table_[j];
        i = j;
      }
    }
    table_[i].slot = kNone;
    --size_;
    return true;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  struct Entry {
    int64_t id = 0;
    int32_t slot = kNone;
  };

  // Fibonacci hashing: the top bits of id x 2^64/phi, so dense ids spread over the table.
  size_t home(int64_t id) const {
    return static_cast<size_t>((static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> shift_);
  }

  void rehash(size_t capacity) {  // Requires: capacity a power of two >= 2 * size_
    std::vector<Entry> old;
    old.swap(table_);
    table_.assign(capacity, Entry{});
    mask_ = capacity - 1;
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (const Entry& e : old) {
      if (e.slot != kNone) insert(e.id, e.slot);
    }
  }

  std::vector<Entry> table_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace kvsim
