#include "models/memory/block_pool.h"

#include "core/check.h"

namespace kvsim {

BlockPool::BlockPool(int64_t num_blocks, bool block_ids, FreeOrder order)
    : num_blocks_(num_blocks),
      stacked_(block_ids && order == FreeOrder::kAny),
      by_key_(num_blocks) {
  KVSIM_CHECK(num_blocks >= 1 && num_blocks < (int64_t{1} << 31), "bad block pool: {} blocks",
              num_blocks);
  if (!block_ids) {
    free_count_ = num_blocks;
    return;
  }
  blocks_.assign(static_cast<size_t>(num_blocks), Block{});
  if (stacked_) {  // the last pushed pops first: push in reverse for id order
    free_stack_.reserve(static_cast<size_t>(num_blocks));
    for (auto b = static_cast<int32_t>(num_blocks); b-- > 0;) push_free_back(b);
    return;
  }
  for (int32_t b = 0; b < static_cast<int32_t>(num_blocks); ++b) push_free_back(b);
}

void BlockPool::push_free_back(int32_t b) {
  if (stacked_) {
    free_stack_.push_back(b);
    ++free_count_;
    return;
  }
  Block& k = block(b);
  k.prev = tail_;
  k.next = -1;
  (tail_ >= 0 ? block(tail_).next : head_) = b;
  tail_ = b;
  ++free_count_;
}

void BlockPool::unlink(int32_t b) {
  KVSIM_CHECK(!stacked_, "block pool: block {} taken out of a free stack (no cache hits)", b);
  Block& k = block(b);
  (k.prev >= 0 ? block(k.prev).next : head_) = k.next;
  (k.next >= 0 ? block(k.next).prev : tail_) = k.prev;
  k.prev = k.next = -1;
  --free_count_;
}

int32_t BlockPool::pop_free() {
  if (stacked_) {
    KVSIM_CHECK(!free_stack_.empty(), "block pool: pop from an empty free stack");
    const int32_t b = free_stack_.back();
    free_stack_.pop_back();
    --free_count_;
    Block& k = block(b);
    k.ref = 1;
    k.filled = 0;
    return b;
  }
  KVSIM_CHECK(head_ >= 0, "block pool: pop from an empty free queue");
  const int32_t b = head_;
  unlink(b);
  Block& k = block(b);
  // A free block that still carries a prefix key is evicted from the prefix cache now.
  if (k.key != 0) unindex_key(b);
  k.ref = 1;
  k.filled = 0;
  return b;
}

bool BlockPool::unref(int32_t b) {
  int32_t& r = block(b).ref;
  KVSIM_CHECK(r > 0, "double free of block {}", b);
  if (--r != 0) return false;
  push_free_back(b);
  return true;
}

void BlockPool::index_key(int32_t b, uint64_t key) {
  block(b).key = key;
  block(b).dup_next = -1;
  auto [first, fresh] = by_key_.try_emplace(key, b);
  if (fresh) {
    if (events_) events_({.key = key, .block_tokens = event_block_tokens_});
    return;
  }
  int32_t last = *first;
  while (block(last).dup_next >= 0) last = block(last).dup_next;
  block(last).dup_next = b;
}

void BlockPool::unindex_key(int32_t b) {
  const uint64_t key = block(b).key;
  int32_t* first = by_key_.find(key);
  KVSIM_CHECK(first != nullptr, "block {} carries key {} that no index entry has", b, key);
  if (*first == b) {
    if (block(b).dup_next >= 0) {
      *first = block(b).dup_next;
    } else {
      by_key_.erase(key);
      if (events_) events_({.removed = true, .key = key, .block_tokens = event_block_tokens_});
    }
  } else {
    int32_t prev = *first;
    while (block(prev).dup_next != b) {
      prev = block(prev).dup_next;
      KVSIM_CHECK(prev >= 0, "block {} is not among its key's copies", b);
    }
    block(prev).dup_next = block(b).dup_next;
  }
  block(b).key = 0;
  block(b).dup_next = -1;
}

void BlockPool::check_invariants() const {
  KVSIM_CHECK(free_count_ >= 0 && free_count_ <= num_blocks_, "{} free blocks of {}", free_count_,
              num_blocks_);
  if (!block_ids()) return;
  int64_t listed = 0;
  for (const int32_t b : free_stack_) {
    KVSIM_CHECK(block(b).ref == 0 && block(b).key == 0, "free-stacked block {} has ref {} or a key",
                b, block(b).ref);
    ++listed;
  }
  for (int32_t b = head_; b >= 0; b = block(b).next) {
    KVSIM_CHECK(block(b).ref == 0, "free-listed block {} has ref {}", b, block(b).ref);
    KVSIM_CHECK(++listed <= num_blocks_, "free list has a cycle");
  }
  KVSIM_CHECK(listed == free_count_, "free list holds {} blocks, count says {}", listed,
              free_count_);
  int64_t unheld = 0;
  for (const Block& k : blocks_) unheld += k.ref == 0;
  KVSIM_CHECK(unheld == free_count_, "{} blocks without holders, {} free", unheld, free_count_);
  by_key_.for_each([&](uint64_t key, int32_t first) {
    for (int32_t b = first; b >= 0; b = block(b).dup_next) {
      KVSIM_CHECK(block(b).key == key, "prefix key of block {} is stale", b);
    }
  });
}

}  // namespace kvsim
