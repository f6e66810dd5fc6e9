// The one pool of KV blocks every paged store draws on, as vLLM v1's BlockPool
// (vllm/v1/core/block_pool.py): block records with reference counts, the free queue
// (FreeKVCacheBlockQueue: freed blocks go to the back, allocation pops the front, a cache hit takes
// a block out of the middle; an intrusive doubly-linked list, so all three are O(1)), and the
// prefix-key index (BlockHashToBlockMap: a key's cached blocks in insertion order, the oldest found
// first, evicting one leaving the others findable). A block popped off the free queue that still
// carries a key is evicted from the index then.
//
// Without block ids (a store without prefix caching: no block is shared and nothing is looked up
// by block, so no figure depends on which block a request holds) the pool is a free count only,
// and taking or returning n blocks is one addition (count_out, count_in). A user that needs ids
// but not vLLM's free order (a hybrid store's group managers keep block tables of ids, and
// without prefix caching no figure depends on which id they hold) asks for FreeOrder::kAny: the
// free blocks are then a stack, the block freed last popped first, so popping and freeing touch
// blocks still in cache instead of the free queue's cold neighbours.
//
// The pool knows nothing of requests, tokens or KV cache groups: its users (the group managers of
// a paged store) keep the block tables and the live-token accounting, and read a block's `filled`
// and `group` fields, which the pool only carries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "models/memory/block_key_index.h"
#include "models/memory/kv_events.h"

namespace kvsim {

class BlockPool {
 public:
  // One record per block, aligned to half a cache line: popping and freeing a block touch one
  // line of it (and of its free-queue neighbour).
  struct alignas(32) Block {
    int32_t ref = 0;     // holders (block-table entries)
    int32_t filled = 0;  // tokens in it, as its user keeps them
    int32_t prev = -1;   // free-queue links (-1: none)
    int32_t next = -1;
    uint64_t key = 0;       // prefix key (0: none)
    int32_t dup_next = -1;  // the next younger cached block with the same key (-1: none)
    int32_t group = 0;      // the KV cache group whose table holds it, as its user sets it
  };

  // kQueue: vLLM's free queue; kAny: any order (a stack, no cache hits: take() refuses a free
  // block).
  enum class FreeOrder { kQueue, kAny };
  // Requires: 1 <= num_blocks < 2^31. With block_ids, every block is free, popped first in id
  // order (vLLM's initial free order); without, only counted.
  BlockPool(int64_t num_blocks, bool block_ids, FreeOrder order = FreeOrder::kQueue);

  int64_t num_blocks() const { return num_blocks_; }
  int64_t free_count() const { return free_count_; }
  bool block_ids() const { return !blocks_.empty(); }

  // Counted pool only: n blocks leave (count_out) or return (count_in).
  void count_out(int64_t n) { free_count_ -= n; }
  void count_in(int64_t n) { free_count_ += n; }

  Block& block(int32_t b) { return blocks_[static_cast<size_t>(b)]; }
  const Block& block(int32_t b) const { return blocks_[static_cast<size_t>(b)]; }

  // Pops the oldest free block, evicting the prefix it still carried, and gives it one holder
  // and no tokens. Requires: free_count() > 0.
  int32_t pop_free();
  // One more holder of block b (a prefix hit); true when b was free and left the free queue.
  bool take(int32_t b) {
    if (block(b).ref != 0) {
      ++block(b).ref;
      return false;
    }
    unlink(b);  // (refuses a free stack: FreeOrder::kAny has no cache hits)
    block(b).ref = 1;
    return true;
  }
  // One holder less; true when b became free: it joins the back of the free queue, keeping its
  // key (findable until popped). Requires: b is held.
  bool unref(int32_t b);
  // Moves a free block to the back of the free queue (vLLM's free order for blocks freed
  // together).
  void push_free_back(int32_t b);

  // Key index: b joins key's cached copies as the youngest; b (keyed) leaves them.
  void index_key(int32_t b, uint64_t key);
  void unindex_key(int32_t b);
  // The oldest cached block with `key`, or -1.
  int32_t cached_block(uint64_t key) const {
    const int32_t* b = by_key_.find(key);
    return b == nullptr ? -1 : *b;
  }
  bool cached(uint64_t key) const { return by_key_.find(key) != nullptr; }
  // Told when a key becomes findable (its first copy is indexed) or stops being findable (its
  // last copy leaves), as vLLM's BlockStored / BlockRemoved KV events; `block_tokens` goes in
  // each event. An empty sink (the default) tells nobody.
  void set_event_sink(KvEventSink sink, int64_t block_tokens) {
    events_ = std::move(sink);
    event_block_tokens_ = block_tokens;
  }

  // The free queue holds exactly the blocks without holders, with no cycle, as many as counted;
  // every indexed block carries its key. Throws InvariantError otherwise.
  void check_invariants() const;

 private:
  void unlink(int32_t b);

  int64_t num_blocks_;
  int64_t free_count_ = 0;
  std::vector<Block> blocks_;  // empty without block ids
  int32_t head_ = -1;          // the free queue, oldest first
  int32_t tail_ = -1;
  bool stacked_ = false;             // FreeOrder::kAny: the free blocks are free_stack_
  std::vector<int32_t> free_stack_;  // the block freed last at the back
  // Key -> its oldest cached block; younger copies follow through Block::dup_next. A key's
  // entry is its oldest block, so there are never more keys than blocks.
  BlockKeyIndex by_key_;
  KvEventSink events_;
  int64_t event_block_tokens_ = 0;
};

}  // namespace kvsim
