#include "models/memory/caching_allocator_store.h"

#include <algorithm>

#include "core/check.h"
#include "models/model_spec.h"

namespace kvsim {

std::string_view growth_policy_name(GrowthPolicy g) {
  switch (g) {
    case GrowthPolicy::kPreallocate: return "preallocate";
    case GrowthPolicy::kConcat: return "concat";
    case GrowthPolicy::kChunked: return "chunked";
  }
  return "concat";
}

CachingAllocatorStore::CachingAllocatorStore(const ModelSpec& model, CachingStoreOptions options)
    : bytes_per_token_(model.kv_bytes_per_token()),
      tensor_bytes_per_token_(int64_t{model.kv_heads} * model.head_dim *
                              dtype_bytes(model.kv_dtype)),
      tensors_(2 * model.layers),
      growth_(options.growth),
      chunk_tokens_(options.chunk_tokens),
      alloc_(options.device_limit_bytes, options.max_split_size_bytes) {
  KVSIM_CHECK(tensor_bytes_per_token_ >= 1 && tensors_ >= 2 && chunk_tokens_ >= 1,
              "bad caching-allocator store: {} bytes/token/tensor, {} tensors, chunk {}",
              tensor_bytes_per_token_, tensors_, chunk_tokens_);
  KVSIM_CHECK(int64_t{tensors_} * tensor_bytes_per_token_ == bytes_per_token_,
              "tensor bytes do not add up to the model's KV bytes per token");
}

int64_t CachingAllocatorStore::capacity_for(int64_t tokens, int64_t max_total) const {
  switch (growth_) {
    case GrowthPolicy::kPreallocate: return std::max(tokens, max_total);
    case GrowthPolicy::kConcat: return tokens;
    case GrowthPolicy::kChunked:
      return (tokens + chunk_tokens_ - 1) / chunk_tokens_ * chunk_tokens_;
  }
  return tokens;
}

void CachingAllocatorStore::account(const Req& r, int sign) {
  held_bytes_ += sign * r.held;
  sums_.account(r.tokens, r.capacity, r.max_total, sign);
}

AllocResult CachingAllocatorStore::allocate(RequestId request, int64_t prompt_tokens,
                                            int64_t max_total_tokens, const PrefixHashes&) {
  KVSIM_CHECK(!holds(request), "request {} already holds KV", request);
  KVSIM_CHECK(prompt_tokens >= 1 && prompt_tokens <= max_total_tokens,
              "request {}: prompt {} max_total {}", request, prompt_tokens, max_total_tokens);
  Req r;
  r.capacity = capacity_for(prompt_tokens, max_total_tokens);
  r.tokens = prompt_tokens;
  r.max_total = max_total_tokens;
  const int64_t bytes = r.capacity * tensor_bytes_per_token_;
  last_request_bytes_ = bytes;
  r.blocks.reserve(static_cast<size_t>(tensors_));
  for (int i = 0; i < tensors_; ++i) {
    CaBlockId b = -1;
    AllocResult res = alloc_.malloc(bytes, &b);
    if (!res) {
      for (CaBlockId done : r.blocks) alloc_.free(done);  // all or nothing (stays cached)
      return res;
    }
    r.blocks.push_back(b);
    r.held += alloc_.block_size(b);
  }
  account(r, +1);
  requests_.emplace(request, std::move(r));
  return AllocResult::success();
}

AllocResult CachingAllocatorStore::grow(RequestId request, int64_t new_total_tokens) {
  Req& r = held_request(requests_, request, "grow");
  KVSIM_CHECK(new_total_tokens > r.tokens, "request {}: grow to {} from {}", request,
              new_total_tokens, r.tokens);
  account(r, -1);
  if (new_total_tokens > r.capacity) {
    const int64_t new_cap = capacity_for(new_total_tokens, r.max_total);
    const int64_t old_bytes = r.capacity * tensor_bytes_per_token_;
    const int64_t new_bytes = new_cap * tensor_bytes_per_token_;
    last_request_bytes_ = new_bytes;
    // Layer by layer, K then V: the grown tensor exists before the old one is dropped.
    for (size_t i = 0; i < r.blocks.size(); ++i) {
      CaBlockId grown = -1;
      AllocResult res = alloc_.malloc(new_bytes, &grown);
      if (!res) {
        // Roll back the tensors already grown (new before old again). If shrinking back finds
        // no room, the tensor keeps its bigger block: more internal waste, nothing lost.
        for (size_t j = 0; j < i; ++j) {
          CaBlockId smaller = -1;
          if (alloc_.malloc(old_bytes, &smaller)) {
            r.held += alloc_.block_size(smaller) - alloc_.block_size(r.blocks[j]);
            alloc_.free(r.blocks[j]);
            r.blocks[j] = smaller;
          }
        }
        account(r, +1);
        return res;
      }
      r.held += alloc_.block_size(grown) - alloc_.block_size(r.blocks[i]);
      alloc_.free(r.blocks[i]);
      r.blocks[i] = grown;
    }
    r.capacity = new_cap;
  }
  r.tokens = new_total_tokens;
  account(r, +1);
  return AllocResult::success();
}

void CachingAllocatorStore::release(RequestId request) {
  const Req& r = held_request(requests_, request, "release");
  account(r, -1);
  for (CaBlockId b : r.blocks) alloc_.free(b);
  requests_.erase(request);
}

int64_t CachingAllocatorStore::tokens(RequestId request) const {
  return held_request(requests_, request, "tokens").tokens;
}

int64_t CachingAllocatorStore::tokens_until_growth_allocates(RequestId request) const {
  const Req& r = held_request(requests_, request, "tokens_until_growth_allocates");
  return r.capacity - r.tokens;
}

KvUsage CachingAllocatorStore::usage() const {
  KvUsage u = held_usage(sums_.live, sums_.reservation, bytes_per_token_, held_bytes_);
  u.free_bytes = alloc_.cached_bytes();
  u.capacity_bytes = held_bytes_ + u.free_bytes;
  if (!requests_.empty()) u.external_bytes = alloc_.cached_bytes_unusable_for(last_request_bytes_);
  u.requests = static_cast<int64_t>(requests_.size());
  return u;
}

void CachingAllocatorStore::check_invariants() const {
  alloc_.check_invariants();
  int64_t held = 0;
  TokenSums sums;
  for (const auto& [id, r] : requests_) {
    KVSIM_CHECK(static_cast<int>(r.blocks.size()) == tensors_, "request {} has {} tensors", id,
                r.blocks.size());
    KVSIM_CHECK(r.tokens <= r.capacity, "request {}: {} tokens in capacity {}", id, r.tokens,
                r.capacity);
    int64_t h = 0;
    for (CaBlockId b : r.blocks) {
      KVSIM_CHECK(alloc_.block_size(b) >= r.capacity * tensor_bytes_per_token_,
                  "request {}: a tensor block is smaller than its capacity", id);
      h += alloc_.block_size(b);
    }
    KVSIM_CHECK(h == r.held, "request {} holds {} bytes, tracked {}", id, h, r.held);
    held += h;
    sums.account(r.tokens, r.capacity, r.max_total, +1);
  }
  KVSIM_CHECK(held == held_bytes_ && sums == sums_,
              "caching store sums disagree with the tracked ones");
  KVSIM_CHECK(held_bytes_ <= alloc_.stats().allocated_bytes, "KV holds {} > allocated {}",
              held_bytes_, alloc_.stats().allocated_bytes);
}

}  // namespace kvsim
