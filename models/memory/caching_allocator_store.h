// HuggingFace-style KV: per request, one K and one V tensor per layer (2L tensors of
// tokens x H_kv x D elements), allocated through the PyTorch caching-allocator model. Growth:
//   preallocate  tensors sized for max_total_tokens at admission (HF static cache)
//   concat       every grow allocates the grown tensor before freeing the old one, layer by
//                layer (HF dynamic cache: torch.cat), so the transient peak is real
//   chunked      like concat, but capacity grows to the next multiple of chunk_tokens, so a
//                trace costs one reallocation per chunk instead of one per token
// A failed grow is rolled back (the grown tensors shrink back), so the store is all-or-nothing.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "models/memory/caching_allocator.h"
#include "models/memory/kv_store.h"
#include "models/memory/store_accounts.h"

namespace kvsim {

struct ModelSpec;

enum class GrowthPolicy { kPreallocate, kConcat, kChunked };
std::string_view growth_policy_name(GrowthPolicy g);

struct CachingStoreOptions {
  GrowthPolicy growth = GrowthPolicy::kConcat;
  int64_t chunk_tokens = 256;
  int64_t device_limit_bytes = 0;  // KvBudget::device_bytes_for_torch()
  int64_t max_split_size_bytes = std::numeric_limits<int64_t>::max();
};

class CachingAllocatorStore final : public KvStore {
 public:
  CachingAllocatorStore(const ModelSpec& model, CachingStoreOptions options);

  std::string_view type() const override { return "caching_allocator"; }
  int64_t kv_bytes_per_token() const override { return bytes_per_token_; }
  bool preallocated() const override { return false; }
  AllocResult allocate(RequestId request, int64_t prompt_tokens, int64_t max_total_tokens,
                       const PrefixHashes& prefix = {}) override;
  AllocResult grow(RequestId request, int64_t new_total_tokens) override;
  void release(RequestId request) override;
  bool holds(RequestId request) const override { return requests_.count(request) != 0; }
  int64_t tokens(RequestId request) const override;
  int64_t tokens_until_growth_allocates(RequestId request) const override;
  KvUsage usage() const override;
  CachingAllocator* caching_allocator() override { return &alloc_; }
  const CachingAllocator* caching_allocator() const override { return &alloc_; }
  void check_invariants() const override;

  int tensors_per_request() const { return tensors_; }
  int64_t tensor_bytes_per_token() const { return tensor_bytes_per_token_; }

 private:
  struct Req {
    std::vector<CaBlockId> blocks;  // K0, V0, K1, V1, ...
    int64_t capacity = 0;           // tokens each tensor holds
    int64_t tokens = 0;
    int64_t max_total = 0;
    int64_t held = 0;  // sum of block sizes
  };
  int64_t capacity_for(int64_t tokens, int64_t max_total) const;
  void account(const Req& r, int sign);

  int64_t bytes_per_token_;
  int64_t tensor_bytes_per_token_;  // H_kv x D x bytes(kv dtype)
  int tensors_;                     // 2 x layers
  GrowthPolicy growth_;
  int64_t chunk_tokens_;
  CachingAllocator alloc_;
  int64_t held_bytes_ = 0;
  TokenSums sums_;  // live and reservation tokens
  int64_t last_request_bytes_ = 0;
  std::unordered_map<RequestId, Req> requests_;
};

}  // namespace kvsim
