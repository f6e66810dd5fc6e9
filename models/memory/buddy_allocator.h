// A binary buddy allocator over `units` slots (kvsim's contiguous store uses one slot per token):
// the allocator the vLLM paper assumes for its Orca baselines (§6.1, "buddy allocation
// algorithm"). A request for n slots takes one block of bit_ceil(n) slots, aligned to its size;
// the slots past n are the allocator's rounding. A freed block merges with its buddy while the
// buddy is free and whole, as Knuth's and Linux's buddy allocators do.
//
// The space need not be a power of two: it starts as its binary decomposition from address 0
// (15,728 = 8192 + 4096 + 2048 + 1024 + 256 + 64 + 32 + 16), each piece a root block aligned to
// its size. The buddy of a root lies in the later, smaller roots, so it is never free at the
// root's order and roots never merge with each other.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

namespace kvsim {

class BuddyAllocator {
 public:
  // Requires: units >= 1.
  explicit BuddyAllocator(int64_t units);

  // The address of a free block of bit_ceil(n) slots, taking the lowest-addressed block of the
  // smallest order that fits and splitting it; -1 when none is free. Requires: n >= 1.
  int64_t allocate(int64_t n);
  // Frees the block at `addr` that allocate(n) returned for the same n.
  void release(int64_t addr, int64_t n);

  static int64_t block_units(int64_t n);  // bit_ceil(n)
  int64_t units() const { return units_; }
  int64_t free_units() const { return free_units_; }
  int64_t largest_free_block() const;
  // Free slots in blocks smaller than bit_ceil(n): free space that cannot hold n slots.
  int64_t free_units_below(int64_t n) const;
  // Free blocks are aligned, disjoint, of their order's size, within the space, and no two free
  // buddies are left unmerged. KVSIM_CHECKs.
  void check_invariants() const;

 private:
  static int order_of(int64_t n);  // ceil(log2(n))
  int64_t units_;
  int64_t free_units_ = 0;
  std::vector<std::set<int64_t>> free_;  // free_[k]: addresses of free blocks of 2^k slots
  std::vector<int64_t> roots_;           // start of each root block, ascending (for checks)
};

}  // namespace kvsim
