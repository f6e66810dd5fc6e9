// What a KV store can do beyond the KvStore basics, in two forms that must agree:
//  - as static metadata, a KvCapabilities set on the store's registry entry
//    (models/memory/kv_store_registry.h): components that need a capability say so in their own
//    registry entry (a guard's `needs`), and a scenario that pairs them with a store lacking it is
//    a ConfigError before anything runs;
//  - at run time, as capability views (KvStore::paged(), KvStore::deferred_growth(),
//    KvStore::caching_allocator()): narrow interfaces for what only some stores have, so KvStore
//    itself carries no store-specific method, no sentinel value and no type test. A store that has
//    a capability implements the interface and returns itself from the view; the others return
//    nullptr. capabilities_of() reads the views back as a set, and the KV store contract suite
//    (tests/contract/) checks that it equals the registry's metadata for every store.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "models/memory/kv_store.h"

namespace kvsim {

enum class KvCapability : uint32_t {
  kPaged = 1u << 0,             // fixed-size blocks: the paged() view (PagedBlocks)
  kDeferredGrowth = 1u << 1,    // the deferred_growth() view (DeferredGrowth): decode growth
                                //   inside held space without a store call per token
  kCachingAllocator = 1u << 2,  // the caching_allocator() view: allocates through torch's
                                //   caching allocator
  kPreallocatedPool = 1u << 3,  // KvStore::preallocated(): the KV space is taken up front, so
                                //   the driver's free memory never sees KV use
};

// A set of KvCapability.
class KvCapabilities {
 public:
  constexpr KvCapabilities() = default;
  constexpr KvCapabilities(KvCapability c) : bits_(static_cast<uint32_t>(c)) {}  // NOLINT: implicit
  constexpr KvCapabilities operator|(KvCapabilities o) const { return from_bits(bits_ | o.bits_); }
  constexpr bool has(KvCapability c) const { return (bits_ & static_cast<uint32_t>(c)) != 0; }
  // Whether every capability of `needed` is here.
  constexpr bool covers(KvCapabilities needed) const {
    return (bits_ & needed.bits_) == needed.bits_;
  }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr bool operator==(const KvCapabilities&) const = default;

 private:
  static constexpr KvCapabilities from_bits(uint32_t b) {
    KvCapabilities c;
    c.bits_ = b;
    return c;
  }
  uint32_t bits_ = 0;
};

constexpr KvCapabilities operator|(KvCapability a, KvCapability b) {
  return KvCapabilities(a) | KvCapabilities(b);
}

// Every capability, for loops and listings.
inline constexpr KvCapability kAllKvCapabilities[] = {
    KvCapability::kPaged, KvCapability::kDeferredGrowth, KvCapability::kCachingAllocator,
    KvCapability::kPreallocatedPool};

// "paged", "deferred growth", "caching allocator".
constexpr std::string_view kv_capability_name(KvCapability c) {
  switch (c) {
    case KvCapability::kPaged: return "paged";
    case KvCapability::kDeferredGrowth: return "deferred growth";
    case KvCapability::kCachingAllocator: return "caching allocator";
    case KvCapability::kPreallocatedPool: return "preallocated pool";
  }
  return "?";
}

// "paged, deferred growth", or "none".
inline std::string kv_capability_list(KvCapabilities caps) {
  std::string out;
  for (KvCapability c : kAllKvCapabilities) {
    if (!caps.has(c)) continue;
    if (!out.empty()) out += ", ";
    out += kv_capability_name(c);
  }
  return out.empty() ? "none" : out;
}

// Capability view of a paged store (KvStore::paged()): its blocks, for a vLLM-style watermark
// guard, the latency model's block size and the prefix cache.
class PagedBlocks {
 public:
  virtual int64_t free_blocks() const = 0;
  virtual int64_t total_blocks() const = 0;
  virtual int64_t block_tokens() const = 0;
  virtual int64_t prefix_hit_blocks() const = 0;  // blocks shared through the prefix cache so far
  virtual bool prefix_caching() const = 0;        // enable_prefix_caching
  // Blocks `request` holds now (shared ones included; with a sliding window, not those freed from
  // its front), for a request's trace (ReplicaObserver::on_request). Requires: held, no deferral
  // window open.
  virtual int64_t held_blocks(RequestId request) const = 0;
  // Prefix-cache lookup (vLLM v1's KVCacheManager.get_computed_blocks): how many leading tokens of
  // a `tokens`-token sequence described by `prefix` have their KV in cached full blocks. A
  // multiple of block_tokens(), and below `tokens`: when the whole sequence hits, its last block
  // is computed again (the last token's logits are needed). 0 without prefix caching. allocate()
  // shares exactly these blocks; the engine prefills only the tokens after them.
  virtual int64_t cached_prefix_tokens(const PrefixHashes& prefix, int64_t tokens) const = 0;
  // Free blocks that allocate(request, tokens, ..., prefix) takes now: one per block of the
  // `tokens` its prefix hits do not cover, and one per hit that sits cached on the free list
  // (vLLM v1's SingleTypeKVCacheManager.get_num_blocks_to_allocate, evictable hits counted).
  virtual int64_t blocks_to_allocate(const PrefixHashes& prefix, int64_t tokens) const = 0;
  // Free blocks the admission gate of vLLM's scheduler_reserve_full_isl asks of a waiting
  // `tokens`-token sequence when a step computes at most `batched` tokens: blocks_to_allocate,
  // with each sliding-window or chunked group's share capped at the most it ever holds at once
  // (KVCacheManager.allocate_slots with full_sequence_must_fit: get_num_blocks_to_allocate with
  // apply_admission_cap=True; kv_group_admission_cap).
  virtual int64_t admission_blocks(const PrefixHashes& prefix, int64_t tokens,
                                   int64_t batched) const = 0;
  // Free blocks that grow_to_at_least(request, tokens) needs now (0 when the request holds that
  // many tokens already): it fails, changing nothing, exactly when this exceeds free_blocks().
  // Requires: held, no deferral window open.
  virtual int64_t blocks_to_grow(RequestId request, int64_t tokens) const = 0;
  // Blocks freed from requests' fronts because they left the sliding window, all time (0
  // without a window): the only blocks a decode step's growth frees.
  virtual int64_t window_freed_blocks() const = 0;
  // The blocks a decode growth of `request` to `target` tokens (from target - 1) returns to the
  // free list as they leave its sliding window (0 without one). Asked without a call that
  // changes anything; its deferral window may be open.
  virtual int64_t window_frees(RequestId request, int64_t target) const = 0;
  // Takes the prefix-cache keys off `request`'s blocks past its first `tokens` tokens (whole
  // blocks within them keep theirs), so that freeing them caches only those. vLLM's async
  // scheduling caches a decoding request's blocks only up to its tokens whose ids are known,
  // one behind the KV it allocated (AsyncScheduler._update_request_with_output). Only blocks
  // keyed as the request's own (past its trace hashes) are affected. Requires: held, window closed.
  virtual void uncache_past(RequestId request, int64_t tokens) = 0;

 protected:
  ~PagedBlocks() = default;
};

// Capability view of a store that takes deferred growth (KvStore::deferred_growth()), the
// engine's decode fast path. open(request) opens the request's deferral window and returns its
// room: the tokens it may gain without a store call each (they fall inside the space it already
// holds and within its max_total_tokens, so each only turns a reservation token into a live one).
// The caller
//   1. reports the sum of such tokens over all requests with add() (usage() counts them at once);
//   2. closes a request's window with settle(request, tokens), handing its share over, before any
//      other call about that request (grow, tokens, release, ...), and after add() has covered it;
//   3. settles everything before check_invariants(), which requires outstanding() == 0.
// The store KVSIM_CHECKs the order: any other call about a request whose window is open is an
// InvariantError, as are settling a closed window, settling more than its room or more than add()
// reported, and adding more than the reservation. sim/serving/kv_ledger.h is the engine's side.
//
// Block crossings in aggregate (crossings_in_aggregate(); the engine's decode aggregate,
// sim/serving/fast_forward/lazy_decodes.h): open_long(request) opens a window whose room runs to
// the request's max_total, across block boundaries. Its tokens are reported as above, except that a
// token that starts a new block whose end is within max_total is reported with add_crossings():
// that block (one in every KV cache group, for a hybrid model) comes off the free list then,
// unattributed, and settle() attributes the blocks the settled tokens span. A crossing into a block
// that ends past max_total (the request's last, partial block) must not be reported so: the caller
// settles first and grows as usual.
class DeferredGrowth {
 public:
  virtual int64_t open(RequestId request) = 0;  // Requires: held, window closed. Returns the room.
  virtual void add(int64_t tokens) = 0;
  virtual void settle(RequestId request, int64_t tokens) = 0;  // Requires: window open
  virtual int64_t outstanding() const = 0;                     // tokens added and not yet settled
  virtual bool crossings_in_aggregate() const { return false; }
  // Requires: crossings_in_aggregate(), held, window closed. Returns the room (to max_total).
  virtual int64_t open_long(RequestId request) { return open(request); }
  // `n` tokens that each start a new full block of some open long window (Requires: n <= free).
  virtual void add_crossings(int64_t n) { (void)n; }
  // Whether each crossing of `request`'s open long window also frees one block from its front
  // (a sliding window's steady state): those are reported with add_swaps() instead, each a
  // block taken and one freed.
  virtual bool long_window_swaps(RequestId request) const {
    (void)request;
    return false;
  }
  virtual void add_swaps(int64_t n) { (void)n; }
  // The usage() this store would report after add_crossings(crossings), add_swaps(swaps) and
  // add(tokens - crossings - swaps), without making them: the fast-forward records a quiet run's
  // states from it (each step's growth, summed). nullopt where the store cannot say.
  virtual std::optional<KvUsage> usage_after(int64_t tokens, int64_t crossings,
                                             int64_t swaps = 0) const {
    (void)tokens;
    (void)crossings;
    (void)swaps;
    return std::nullopt;
  }

 protected:
  ~DeferredGrowth() = default;
};

// The capabilities a built store really has, read from its views (non-const: the deferred-growth
// view is a mutable protocol).
inline KvCapabilities capabilities_of(KvStore& store) {
  KvCapabilities caps;
  if (store.paged() != nullptr) caps = caps | KvCapability::kPaged;
  if (store.deferred_growth() != nullptr) caps = caps | KvCapability::kDeferredGrowth;
  if (store.caching_allocator() != nullptr) caps = caps | KvCapability::kCachingAllocator;
  if (store.preallocated()) caps = caps | KvCapability::kPreallocatedPool;
  return caps;
}

}  // namespace kvsim
