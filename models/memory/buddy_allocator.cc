#include "models/memory/buddy_allocator.h"

#include <bit>

#include "core/check.h"

namespace kvsim {

namespace {
constexpr int kOrders = 63;
}

BuddyAllocator::BuddyAllocator(int64_t units) : units_(units), free_(kOrders) {
  KVSIM_CHECK(units_ >= 1, "buddy allocator over {} slots", units_);
  int64_t addr = 0;
  for (int k = kOrders - 1; k >= 0; --k) {  // the binary decomposition, largest piece first
    if ((units_ >> k) & 1) {
      free_[k].insert(addr);
      roots_.push_back(addr);
      addr += int64_t{1} << k;
    }
  }
  free_units_ = units_;
}

int BuddyAllocator::order_of(int64_t n) {
  return static_cast<int>(std::bit_width(static_cast<uint64_t>(n - 1)));
}

int64_t BuddyAllocator::block_units(int64_t n) { return int64_t{1} << order_of(n); }

int64_t BuddyAllocator::allocate(int64_t n) {
  KVSIM_CHECK(n >= 1, "buddy allocation of {} slots", n);
  const int k = order_of(n);
  if (k >= kOrders) return -1;
  int j = k;
  while (j < kOrders && free_[j].empty()) ++j;
  if (j == kOrders) return -1;
  const int64_t addr = *free_[j].begin();  // lowest address of the smallest order that fits
  free_[j].erase(free_[j].begin());
  while (j > k) {  // split, keeping the lower half and freeing the upper
    --j;
    free_[j].insert(addr + (int64_t{1} << j));
  }
  free_units_ -= int64_t{1} << k;
  return addr;
}

void BuddyAllocator::release(int64_t addr, int64_t n) {
  int k = order_of(n);
  KVSIM_CHECK(addr >= 0 && addr % (int64_t{1} << k) == 0 && addr + (int64_t{1} << k) <= units_,
              "buddy release of {} slots at {}", n, addr);
  free_units_ += int64_t{1} << k;
  while (k + 1 < kOrders) {
    const int64_t buddy = addr ^ (int64_t{1} << k);
    auto it = free_[k].find(buddy);
    if (it == free_[k].end()) break;
    free_[k].erase(it);
    addr = std::min(addr, buddy);
    ++k;
  }
  KVSIM_CHECK(free_[k].insert(addr).second, "double free of the buddy block at {}", addr);
}

int64_t BuddyAllocator::largest_free_block() const {
  for (int k = kOrders - 1; k >= 0; --k) {
    if (!free_[k].empty()) return int64_t{1} << k;
  }
  return 0;
}

int64_t BuddyAllocator::free_units_below(int64_t n) const {
  int64_t sum = 0;
  for (int k = 0; k < order_of(n) && k < kOrders; ++k) {
    sum += static_cast<int64_t>(free_[k].size()) << k;
  }
  return sum;
}

void BuddyAllocator::check_invariants() const {
  int64_t total = 0;
  int64_t end_of_previous = 0;
  std::set<std::pair<int64_t, int>> blocks;  // (address, order), address order
  for (int k = 0; k < kOrders; ++k) {
    for (int64_t a : free_[k]) {
      const int64_t size = int64_t{1} << k;
      KVSIM_CHECK(a % size == 0 && a + size <= units_, "free block {} of order {} misplaced", a, k);
      KVSIM_CHECK(free_[k].count(a ^ size) == 0,
                  "free buddies {} and {} of order {} were not merged", a, a ^ size, k);
      blocks.emplace(a, k);
      total += size;
    }
  }
  for (const auto& [a, k] : blocks) {
    KVSIM_CHECK(a >= end_of_previous, "free blocks overlap at {}", a);
    end_of_previous = a + (int64_t{1} << k);
  }
  KVSIM_CHECK(total == free_units_, "free slots {} != tracked {}", total, free_units_);
}

}  // namespace kvsim
