// Orca/FasterTransformer-style contiguous KV: each request reserves one contiguous region in an
// address-ordered arena, sized by a reservation policy, placed first-fit or best-fit, or taken
// from a binary buddy allocator (the vLLM paper's assumption for its Orca baselines). External
// fragmentation is not assumed: it emerges from the holes the arena leaves.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "models/memory/buddy_allocator.h"
#include "models/memory/kv_store.h"
#include "models/memory/store_accounts.h"

namespace kvsim {

enum class ReservePolicy {
  kMaxLen,             // max_len tokens for every request (Orca "Max")
  kPromptPlusMaxNew,   // exactly max_total_tokens (Orca "Oracle" when that is the true length)
  kPow2,               // the next power of two >= max_total_tokens
  kPromptPlusPow2New,  // the prompt + the next power of two >= the new tokens (the vLLM paper's
                       // Orca (Pow2): "25 output tokens reserve 32")
  kExact,              // the prompt only; every grow reallocates to the exact new length
};
// kBuddy: regions are blocks of a binary buddy allocator over token slots (buddy_allocator.h):
// a region of n tokens takes bit_ceil(n) slots, and the tail counts as KvUsage::rounding_bytes.
enum class FitPolicy { kFirst, kBest, kBuddy };
std::string_view reserve_policy_name(ReservePolicy p);  // "max_len", ...
std::string_view fit_policy_name(FitPolicy p);          // "first", "best", "buddy"

struct ContiguousStoreOptions {
  int64_t arena_bytes = 0;
  ReservePolicy reserve = ReservePolicy::kMaxLen;
  FitPolicy fit = FitPolicy::kFirst;
  int64_t max_len = 2048;  // tokens, for kMaxLen
};

class ContiguousStore final : public KvStore {
 public:
  // Requires: arena_bytes >= 1, kv_bytes_per_token >= 1, max_len >= 1.
  ContiguousStore(int64_t kv_bytes_per_token, ContiguousStoreOptions options);

  std::string_view type() const override { return "contiguous"; }
  int64_t kv_bytes_per_token() const override { return bytes_per_token_; }
  bool preallocated() const override { return true; }
  AllocResult allocate(RequestId request, int64_t prompt_tokens, int64_t max_total_tokens,
                       const PrefixHashes& prefix = {}) override;
  // Grows in place while the region has room; past it, extends in place into an adjacent hole
  // or moves to a new region (allocated before the old one is freed: the copy's transient peak).
  // Under `fit: buddy` it always moves (a buddy block does not extend).
  AllocResult grow(RequestId request, int64_t new_total_tokens) override;
  void release(RequestId request) override;
  bool holds(RequestId request) const override { return requests_.count(request) != 0; }
  int64_t tokens(RequestId request) const override;
  int64_t tokens_until_growth_allocates(RequestId request) const override;
  KvUsage usage() const override;
  void check_invariants() const override;

  int64_t arena_bytes() const { return arena_bytes_; }
  int64_t free_bytes() const { return free_bytes_; }
  int64_t largest_hole_bytes() const;
  int64_t hole_count() const { return static_cast<int64_t>(holes_.size()); }

 private:
  struct Req {
    int64_t addr = 0;
    int64_t reserved_tokens = 0;
    int64_t tokens = 0;
    int64_t max_total = 0;
    int64_t region_tokens = 0;  // reserved_tokens, or its buddy block (bit_ceil) under kBuddy
  };
  int64_t region_tokens_for(int64_t reserved) const;
  int64_t reservation_tokens_for(int64_t prompt, int64_t max_total) const;
  // Carves `bytes` out of a hole chosen by the fit policy; -1 when none is large enough.
  int64_t carve(int64_t bytes);
  void give_back(int64_t addr, int64_t bytes);  // merges with neighbouring holes
  bool try_extend(int64_t addr, int64_t old_bytes, int64_t new_bytes);
  AllocResult fail(int64_t wanted) const;
  void account(const Req& r, int sign);

  int64_t bytes_per_token_;
  int64_t arena_bytes_;
  ReservePolicy reserve_;
  FitPolicy fit_;
  int64_t max_len_;
  std::map<int64_t, int64_t> holes_;               // addr -> bytes, address order
  std::set<std::pair<int64_t, int64_t>> by_size_;  // (bytes, addr), for best fit
  int64_t free_bytes_ = 0;
  TokenSums sums_;                       // live and reservation tokens
  int64_t reserved_tokens_ = 0;          // sum of reserved_tokens
  int64_t region_tokens_ = 0;            // sum of region_tokens
  std::optional<BuddyAllocator> buddy_;  // kBuddy only; then holes_ and by_size_ stay empty
  int64_t last_request_bytes_ = 0;       // for the external-fragmentation figure
  std::unordered_map<RequestId, Req> requests_;
};

}  // namespace kvsim
