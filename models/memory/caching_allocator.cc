#include "models/memory/caching_allocator.h"

#include <algorithm>

#include "core/check.h"

namespace kvsim {

CachingAllocator::CachingAllocator(int64_t device_limit_bytes, int64_t max_split_size_bytes)
    : device_limit_bytes_(device_limit_bytes), max_split_size_(max_split_size_bytes) {
  KVSIM_CHECK(device_limit_bytes >= 0, "device limit {} < 0", device_limit_bytes);
  KVSIM_CHECK(max_split_size_bytes > kCaLargeBuffer, "max_split_size {} must exceed 20 MiB",
              max_split_size_bytes);
}

int64_t CachingAllocator::round_size(int64_t size) {
  if (size < kCaMinBlockSize) return kCaMinBlockSize;
  return kCaMinBlockSize * ((size + kCaMinBlockSize - 1) / kCaMinBlockSize);
}

int64_t CachingAllocator::segment_size(int64_t rounded) {
  if (rounded <= kCaSmallSize) return kCaSmallBuffer;
  if (rounded < kCaMinLargeAlloc) return kCaLargeBuffer;
  return kCaRoundLarge * ((rounded + kCaRoundLarge - 1) / kCaRoundLarge);
}

int32_t CachingAllocator::new_slot() {
  int32_t id;
  if (!free_slots_.empty()) {
    id = free_slots_.back();
    free_slots_.pop_back();
    blocks_[static_cast<size_t>(id)] = Block{};
  } else {
    id = static_cast<int32_t>(blocks_.size());
    blocks_.emplace_back();
  }
  blocks_[static_cast<size_t>(id)].in_use_slot = true;
  return id;
}

void CachingAllocator::drop_slot(int32_t id) {
  blocks_[static_cast<size_t>(id)].in_use_slot = false;
  free_slots_.push_back(id);
}

// PyTorch's get_free_block: best fit is the smallest cached block >= the request; the
// max_split_size rules may refuse it (no further search).
int32_t CachingAllocator::get_free_block(int64_t rounded, bool small) {
  Pool& pool = pool_of(small);
  auto it = pool.lower_bound(FreeKey{rounded, -1, -1});
  if (it == pool.end()) return -1;
  if (rounded < max_split_size_ && it->size >= max_split_size_) return -1;
  if (rounded >= max_split_size_ && it->size >= rounded + kCaLargeBuffer) return -1;
  const int32_t id = it->id;
  pool.erase(it);
  return id;
}

int32_t CachingAllocator::alloc_segment(int64_t rounded, bool small) {
  const int64_t seg = segment_size(rounded);
  if (seg > device_free_bytes()) return -1;
  const int32_t id = new_slot();
  Block& b = blocks_[static_cast<size_t>(id)];
  b.addr = next_addr_;
  b.size = seg;
  b.small = small;
  next_addr_ += seg;
  stats_.reserved_bytes += seg;
  stats_.segments += 1;
  stats_.num_device_allocs += 1;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  return id;
}

void CachingAllocator::release_segment(int32_t id) {
  Block& b = blocks_[static_cast<size_t>(id)];
  KVSIM_CHECK(!b.allocated && b.prev < 0 && b.next < 0,
              "releasing block {} that is not a free "
              "whole segment",
              id);
  pool_of(b.small).erase(FreeKey{b.size, b.addr, id});
  stats_.reserved_bytes -= b.size;
  stats_.segments -= 1;
  stats_.num_device_frees += 1;
  drop_slot(id);
}

bool CachingAllocator::should_split(const Block& b, int64_t rounded) const {
  const int64_t remaining = b.size - rounded;
  if (b.small) return remaining >= kCaMinBlockSize;
  return rounded < max_split_size_ && remaining > kCaSmallSize;
}

// alloc_found_block: split off the tail when the rules say so; the allocation keeps the head.
CaBlockId CachingAllocator::take(int32_t id, int64_t rounded, int64_t requested) {
  if (should_split(blocks_[static_cast<size_t>(id)], rounded)) {
    const int32_t rest = new_slot();
    Block& b = blocks_[static_cast<size_t>(id)];  // new_slot may have moved the vector
    Block& r = blocks_[static_cast<size_t>(rest)];
    r.addr = b.addr + rounded;
    r.size = b.size - rounded;
    r.small = b.small;
    r.prev = id;
    r.next = b.next;
    if (b.next >= 0) blocks_[static_cast<size_t>(b.next)].prev = rest;
    b.next = rest;
    b.size = rounded;
    pool_of(r.small).insert(FreeKey{r.size, r.addr, rest});
  }
  Block& b = blocks_[static_cast<size_t>(id)];
  b.allocated = true;
  b.requested = requested;
  stats_.allocated_bytes += b.size;
  stats_.requested_bytes += requested;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return id;
}

// release_available_cached_blocks: with max_split_size set, cudaFree oversize cached segments
// (largest first) until enough is released for this request.
bool CachingAllocator::release_available_cached_blocks(int64_t rounded) {
  if (max_split_size_ == std::numeric_limits<int64_t>::max()) return false;
  Pool& pool = large_pool_;
  const int64_t want = std::max(rounded, max_split_size_);
  auto it = pool.lower_bound(FreeKey{want, -1, -1});
  auto whole = [&](const FreeKey& k) {
    const Block& b = blocks_[static_cast<size_t>(k.id)];
    return b.prev < 0 && b.next < 0;
  };
  if (it != pool.end() && whole(*it)) {
    release_segment(it->id);
    return true;
  }
  std::vector<int32_t> victims;
  int64_t released = 0;
  for (auto r = std::make_reverse_iterator(it); r != pool.rend() && released < want; ++r) {
    if (r->size < max_split_size_) break;
    if (!whole(*r)) continue;
    released += r->size;
    victims.push_back(r->id);
  }
  if (released < want) return false;
  for (int32_t v : victims) release_segment(v);
  return true;
}

// release_cached_blocks (empty_cache): cudaFree every cached block that is a whole segment.
void CachingAllocator::release_cached_blocks() {
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    std::vector<int32_t> whole;
    for (const FreeKey& k : *pool) {
      const Block& b = blocks_[static_cast<size_t>(k.id)];
      if (b.prev < 0 && b.next < 0) whole.push_back(k.id);
    }
    for (int32_t id : whole) release_segment(id);
  }
}

void CachingAllocator::empty_cache() { release_cached_blocks(); }

AllocResult CachingAllocator::oom(int64_t rounded) {
  stats_.num_ooms += 1;
  const int64_t cached = cached_bytes();
  const int64_t free_total = cached + device_free_bytes();
  const OomReason why = free_total >= rounded ? OomReason::kFragmentation : OomReason::kCapacity;
  AllocResult r = AllocResult::failure(why, rounded, free_total,
                                       std::max(largest_cached_block(), device_free_bytes()));
  r.torch_allocated_bytes = stats_.allocated_bytes;
  r.torch_reserved_bytes = stats_.reserved_bytes;
  r.driver_free_bytes = device_free_bytes();
  return r;
}

AllocResult CachingAllocator::malloc(int64_t size, CaBlockId* out) {
  KVSIM_CHECK(size > 0, "malloc of {} bytes", size);
  const int64_t rounded = round_size(size);
  const bool small = is_small(rounded);
  int32_t id = get_free_block(rounded, small);
  if (id < 0) id = alloc_segment(rounded, small);
  if (id < 0 && release_available_cached_blocks(rounded)) id = alloc_segment(rounded, small);
  if (id < 0) {
    // Last resort before an OOM: give every unsplit cached segment back to the driver.
    stats_.num_alloc_retries += 1;
    release_cached_blocks();
    id = alloc_segment(rounded, small);
  }
  if (id < 0) return oom(rounded);
  *out = take(id, rounded, size);
  return AllocResult::success();
}

void CachingAllocator::free(CaBlockId block) {
  KVSIM_CHECK(block >= 0 && static_cast<size_t>(block) < blocks_.size() &&
                  blocks_[static_cast<size_t>(block)].in_use_slot &&
                  blocks_[static_cast<size_t>(block)].allocated,
              "double free or bad block {}", block);
  int32_t id = block;
  Block* b = &blocks_[static_cast<size_t>(id)];
  stats_.allocated_bytes -= b->size;
  stats_.requested_bytes -= b->requested;
  b->allocated = false;
  b->requested = 0;
  // try_merge_blocks with the previous and next free neighbours of the same segment.
  if (b->prev >= 0 && !blocks_[static_cast<size_t>(b->prev)].allocated) {
    const int32_t p = b->prev;
    Block& pb = blocks_[static_cast<size_t>(p)];
    pool_of(pb.small).erase(FreeKey{pb.size, pb.addr, p});
    pb.size += b->size;
    pb.next = b->next;
    if (b->next >= 0) blocks_[static_cast<size_t>(b->next)].prev = p;
    drop_slot(id);
    id = p;
    b = &blocks_[static_cast<size_t>(id)];
  }
  if (b->next >= 0 && !blocks_[static_cast<size_t>(b->next)].allocated) {
    const int32_t n = b->next;
    Block& nb = blocks_[static_cast<size_t>(n)];
    pool_of(nb.small).erase(FreeKey{nb.size, nb.addr, n});
    b->size += nb.size;
    b->next = nb.next;
    if (nb.next >= 0) blocks_[static_cast<size_t>(nb.next)].prev = id;
    drop_slot(n);
  }
  pool_of(b->small).insert(FreeKey{b->size, b->addr, id});
}

int64_t CachingAllocator::block_size(CaBlockId block) const {
  KVSIM_CHECK(block >= 0 && static_cast<size_t>(block) < blocks_.size() &&
                  blocks_[static_cast<size_t>(block)].allocated,
              "block {} is not live", block);
  return blocks_[static_cast<size_t>(block)].size;
}

int64_t CachingAllocator::cached_bytes_unusable_for(int64_t size) const {
  if (size <= 0) return 0;
  const int64_t rounded = round_size(size);
  const bool small = is_small(rounded);
  int64_t unusable = 0;
  for (const FreeKey& k : pool_of(!small)) unusable += k.size;  // the other pool: never usable
  for (const FreeKey& k : pool_of(small)) {
    const bool usable = k.size >= rounded &&
                        !(rounded < max_split_size_ && k.size >= max_split_size_) &&
                        !(rounded >= max_split_size_ && k.size >= rounded + kCaLargeBuffer);
    if (!usable) unusable += k.size;
  }
  return unusable;
}

int64_t CachingAllocator::largest_cached_block() const {
  int64_t m = 0;
  if (!small_pool_.empty()) m = std::max(m, small_pool_.rbegin()->size);
  if (!large_pool_.empty()) m = std::max(m, large_pool_.rbegin()->size);
  return m;
}

void CachingAllocator::check_invariants() const {
  int64_t allocated = 0, requested = 0, reserved = 0, segments = 0, in_pools = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    if (!b.in_use_slot) continue;
    const int32_t id = static_cast<int32_t>(i);
    KVSIM_CHECK(b.size > 0 && b.size % kCaMinBlockSize == 0, "block {} has size {}", id, b.size);
    if (b.allocated) {
      allocated += b.size;
      requested += b.requested;
      KVSIM_CHECK(b.requested <= b.size, "block {} requested {} > size {}", id, b.requested,
                  b.size);
    } else {
      KVSIM_CHECK(pool_of(b.small).count(FreeKey{b.size, b.addr, id}) == 1,
                  "free block {} missing from its pool", id);
      ++in_pools;
    }
    if (b.next >= 0) {
      const Block& n = blocks_[static_cast<size_t>(b.next)];
      KVSIM_CHECK(n.in_use_slot && n.prev == id && n.addr == b.addr + b.size && n.small == b.small,
                  "blocks {} and {} do not tile their segment", id, b.next);
      KVSIM_CHECK(b.allocated || n.allocated, "adjacent free blocks {} and {} were not merged", id,
                  b.next);
    }
    if (b.prev < 0) {  // a segment head: walk the segment
      ++segments;
      int64_t seg = 0;
      for (int32_t c = id; c >= 0; c = blocks_[static_cast<size_t>(c)].next) {
        seg += blocks_[static_cast<size_t>(c)].size;
      }
      reserved += seg;
    }
  }
  KVSIM_CHECK(in_pools == static_cast<int64_t>(small_pool_.size() + large_pool_.size()),
              "pools hold {} entries for {} free blocks", small_pool_.size() + large_pool_.size(),
              in_pools);
  KVSIM_CHECK(allocated == stats_.allocated_bytes, "allocated {} != stats {}", allocated,
              stats_.allocated_bytes);
  KVSIM_CHECK(requested == stats_.requested_bytes, "requested {} != stats {}", requested,
              stats_.requested_bytes);
  KVSIM_CHECK(reserved == stats_.reserved_bytes, "reserved {} != stats {}", reserved,
              stats_.reserved_bytes);
  KVSIM_CHECK(segments == stats_.segments, "segments {} != stats {}", segments, stats_.segments);
  KVSIM_CHECK(stats_.reserved_bytes >= stats_.allocated_bytes, "reserved {} < allocated {}",
              stats_.reserved_bytes, stats_.allocated_bytes);
  KVSIM_CHECK(stats_.reserved_bytes <= device_limit_bytes_, "reserved {} > device limit {}",
              stats_.reserved_bytes, device_limit_bytes_);
}

}  // namespace kvsim
