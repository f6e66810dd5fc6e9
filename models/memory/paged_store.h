// vLLM's paged KV store: a fixed pool of blocks of `block_tokens` tokens; a request holds
// ceil(tokens / block_tokens) blocks, so its waste is the slack in its last block. Free blocks
// form an intrusive doubly-linked list (freed blocks go to the back, allocation pops the front):
// allocate, free and "touch" a cached block are O(1). With prefix caching, full prompt blocks are
// keyed by the request's prefix hashes; equal keys share one ref-counted block, counted once, and
// a freed keyed block stays findable until it is popped for someone else (vLLM v1's BlockPool).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "models/memory/kv_store.h"

namespace kvsim {

struct PagedStoreOptions {
  int64_t block_tokens = 16;
  int64_t num_blocks = 0;
  bool enable_prefix_caching = false;
};

class PagedStore final : public KvStore {
 public:
  // Requires: block_tokens >= 1, num_blocks >= 1, kv_bytes_per_token >= 1.
  PagedStore(int64_t kv_bytes_per_token, PagedStoreOptions options);

  std::string_view type() const override { return "paged"; }
  int64_t kv_bytes_per_token() const override { return bytes_per_token_; }
  AllocResult allocate(RequestId request, int64_t prompt_tokens, int64_t max_total_tokens,
                       const PrefixHashes& prefix = {}) override;
  AllocResult grow(RequestId request, int64_t new_total_tokens) override;
  void release(RequestId request) override;
  bool holds(RequestId request) const override { return requests_.count(request) != 0; }
  int64_t tokens(RequestId request) const override;
  int64_t tokens_until_growth_allocates(RequestId request) const override;
  KvUsage usage() const override;
  int64_t free_blocks() const override { return free_count_; }
  int64_t total_blocks() const override { return num_blocks_; }
  int64_t block_tokens() const override { return block_tokens_; }
  void check_invariants() const override;

  int64_t block_bytes() const { return block_bytes_; }
  int64_t prefix_hit_blocks() const { return prefix_hits_; }  // blocks shared so far
  // Blocks a request holds (shared ones included), in order. Requires: holds(request).
  const std::vector<int32_t>& block_table(RequestId request) const;

 private:
  struct Req {
    std::vector<int32_t> blocks;
    int64_t tokens = 0;
    int64_t max_total = 0;
  };
  int32_t pop_free();
  void unlink(int32_t b);
  void push_free_back(int32_t b);
  void unref(int32_t b);
  void add_slack(const Req& r, int sign);

  int64_t bytes_per_token_;
  int64_t block_tokens_;
  int64_t num_blocks_;
  int64_t block_bytes_;
  bool prefix_caching_;
  // Per block: reference count, filled tokens, free-list links, prefix key (0 = none).
  std::vector<int32_t> ref_;
  std::vector<int32_t> filled_;
  std::vector<int32_t> prev_;
  std::vector<int32_t> next_;
  std::vector<uint64_t> key_;
  int32_t head_ = -1;
  int32_t tail_ = -1;
  int64_t free_count_ = 0;
  int64_t live_tokens_ = 0;         // sum of filled over blocks with ref > 0
  int64_t reservation_tokens_ = 0;  // slack in last blocks a request may still fill
  int64_t internal_tokens_ = 0;     // slack in last blocks past max_total
  int64_t prefix_hits_ = 0;
  std::unordered_map<uint64_t, int32_t> by_key_;
  std::unordered_map<RequestId, Req> requests_;
};

}  // namespace kvsim
