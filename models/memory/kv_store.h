// The KV store interface: where a replica keeps the K and V tensors of its requests. Three
// implementations (paged blocks, a contiguous arena, PyTorch's caching allocator) sit behind it
// and are built from YAML by make_kv_store(). An OOM is a returned AllocResult, never an exception.
//
// Waste has ONE definition everywhere (docs/memory.md):
//   live         bytes of token state that exist now (tokens produced so far x bytes/token;
//                prefix blocks shared by several requests count once)
//   reservation  held for tokens the request has not produced yet but may, up to its
//                max_total_tokens (prompt + max new tokens)
//   internal     held but never usable by the request: capacity beyond max_total_tokens and
//                rounding inside allocation units (block slack past the end, 512 B rounding,
//                unsplit remainders of allocator blocks)
//   external     free bytes inside the store's space that cannot serve the most recent
//                allocation size (arena holes, cached allocator blocks too small to use)
//   footprint    live + reservation + internal + external
//   usage efficiency = live / footprint; each waste fraction = that waste / footprint,
//   so efficiency + the three fractions = 1 (the shape of the vLLM paper's Figure 2).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "models/memory/kv_events.h"

namespace kvsim {

class ConfigNode;
class CachingAllocator;
class DeferredGrowth;  // kv_capabilities.h
class PagedBlocks;     // kv_capabilities.h
struct ModelSpec;
struct GpuSpec;

using RequestId = int64_t;

// Why an allocation failed.
enum class OomReason {
  kNone,           // it did not fail
  kCapacity,       // not enough free bytes in total
  kFragmentation,  // enough free bytes in total, but no usable contiguous piece / block
  kTooLong,        // the request exceeds what the store can ever hold for one request (max_len)
};
std::string_view oom_reason_name(OomReason r);  // "none", "capacity", "fragmentation", "too_long"

// The result of allocate/grow/reserve. On failure nothing changed (all-or-nothing).
struct AllocResult {
  bool ok = true;
  OomReason reason = OomReason::kNone;
  int64_t wanted_bytes = 0;        // bytes the failing step asked for (0 on success)
  int64_t store_free_bytes = 0;    // free in the store's own view (free blocks, arena free, cached)
  int64_t largest_free_bytes = 0;  // the largest piece the store could have handed out
  // The three views at the moment of failure. A KvStore fills what it knows (its own allocator);
  // GpuMemoryPool fills them for the whole GPU.
  int64_t torch_allocated_bytes = 0;
  int64_t torch_reserved_bytes = 0;
  int64_t driver_free_bytes = 0;

  explicit operator bool() const { return ok; }
  // One line, e.g. "out of memory (fragmentation): wanted 1,048,576 bytes; store free ...".
  std::string message() const;

  static AllocResult success() { return {}; }
  static AllocResult failure(OomReason reason, int64_t wanted, int64_t store_free,
                             int64_t largest_free);
};

// Prefix-block hashes of a request (from traces such as Mooncake): entry j identifies the prompt
// prefix up to the end of token block j of `block_tokens` tokens. Equal entries mean equal
// prefixes. `prompt_tokens` is the length of the prompt the hashes describe (a trace's last hash
// block is usually partial): only store blocks that end inside it are keyed. 0: as far as the
// hashes reach.
struct PrefixHashes {
  std::span<const uint64_t> hashes;
  int64_t block_tokens = 0;
  int64_t prompt_tokens = 0;
  // The request the sequence belongs to (-1: none). With it, its full blocks that the hashes do
  // not cover (generated tokens, a prompt without hashes) are cached under keys of its own, so
  // that it hits them again when it recomputes after a preemption: vLLM v1 hashes every full
  // block of a request's tokens, generated ones included (Request.block_hashes).
  int64_t owner = -1;
};

// Byte figures of a store. All bytes are exact.
struct KvUsage {
  int64_t live_bytes = 0;
  int64_t internal_bytes = 0;
  int64_t reservation_bytes = 0;
  int64_t external_bytes = 0;
  int64_t held_bytes = 0;      // live + internal + reservation: taken out of the store for requests
  int64_t capacity_bytes = 0;  // space the store occupies on the GPU (paged pool, arena; for the
                               // caching allocator: bytes reserved for KV segments)
  int64_t free_bytes = 0;      // capacity - held (free blocks, arena holes, cached KV bytes)
  // The part of internal_bytes that is the allocator's rounding of a request's region past its
  // reservation (a buddy block's tail). The vLLM paper's Figure 2 counts it as the allocator's
  // external fragmentation, not internal (docs/memory.md, "vLLM Figure 2, reproduced"). 0 for
  // every store but the contiguous store with `fit: buddy`.
  int64_t rounding_bytes = 0;
  int64_t requests = 0;  // requests currently holding memory

  int64_t footprint_bytes() const { return held_bytes + external_bytes; }
  double usage_efficiency() const;  // live / footprint; 1 when the footprint is 0
};

// What the store may use. The factory sizes the store from it (vLLM-style for paged).
struct KvBudget {
  int64_t capacity_bytes = 0;  // GpuSpec::memory_bytes
  int64_t context_bytes = 0;   // CUDA context
  int64_t weights_bytes = 0;
  int64_t workspace_bytes = 0;        // non-torch workspace
  int64_t activation_peak_bytes = 0;  // from the profile run (activation_peak_bytes())

  int64_t non_kv_bytes() const {
    return context_bytes + weights_bytes + workspace_bytes + activation_peak_bytes;
  }
  // What the device has left after context, weights and workspace (activations not subtracted):
  // the caching allocator's device limit.
  int64_t device_bytes_for_torch() const {
    return capacity_bytes - context_bytes - weights_bytes - workspace_bytes;
  }
};

// The operations every store has. What only some stores have is a capability view: a pointer to
// a narrow interface (kv_capabilities.h), or nullptr when the store has no such capability.
class KvStore {
 public:
  virtual ~KvStore() = default;

  // "paged", "contiguous" or "caching_allocator".
  virtual std::string_view type() const = 0;
  virtual int64_t kv_bytes_per_token() const = 0;
  // Whether the KV space is allocated up front (paged blocks, a contiguous arena): a shortage
  // there means wait or preempt. Otherwise (the caching allocator) every allocation is a live
  // cudaMalloc and a shortage is an OOM.
  virtual bool preallocated() const = 0;

  // Admits `request` holding `prompt_tokens` tokens now and at most `max_total_tokens` ever.
  // Requires: request not held; 1 <= prompt_tokens <= max_total_tokens. A store with a prefix
  // cache (PagedBlocks::prefix_caching()) shares the leading blocks that
  // PagedBlocks::cached_prefix_tokens(prefix, prompt_tokens) counts, and keys the request's full
  // prompt blocks as they are allocated (here and in grow) so that later requests find them.
  virtual AllocResult allocate(RequestId request, int64_t prompt_tokens, int64_t max_total_tokens,
                               const PrefixHashes& prefix = {}) = 0;
  // Grows a held request to `new_total_tokens` (> its current tokens; usually +1 per decode
  // iteration). May exceed max_total_tokens only where the store can (not for max_len).
  virtual AllocResult grow(RequestId request, int64_t new_total_tokens) = 0;
  // grow() to `tokens` unless the request already holds that many (then nothing changes). The
  // engine calls it for every decoding sequence of every iteration; stores override it to find
  // the request once. Requires: request held.
  virtual AllocResult grow_to_at_least(RequestId request, int64_t tokens) {
    if (this->tokens(request) >= tokens) return AllocResult::success();
    return grow(request, tokens);
  }

  // Frees everything the request holds. Requires: request held.
  virtual void release(RequestId request) = 0;

  virtual bool holds(RequestId request) const = 0;
  virtual int64_t tokens(RequestId request) const = 0;  // current tokens. Requires: holds()
  // How many more tokens the request can gain with grow() before the store must allocate again
  // (paged: slack in its last block; contiguous: room in its region; caching allocator: room in
  // its tensors). 0 means the next grow allocates. The KV trace replay (sim/engine/kv_replay.cc)
  // grows a decode run to the next allocation in one call per request with it.
  virtual int64_t tokens_until_growth_allocates(RequestId request) const = 0;

  // Usage and waste now (O(1) for paged; O(holes) for the arena and the allocator).
  virtual KvUsage usage() const = 0;

  // KVSIM_CHECK every internal invariant (no leaked block, no double owner, counts add up).
  // O(size of the store); for tests and the engine's checking mode.
  virtual void check_invariants() const = 0;

  // Capability views (nullptr: the store has no such capability).
  // Blocks of a paged store.
  virtual const PagedBlocks* paged() const { return nullptr; }
  // The same view, for the calls that change the blocks' cache keys (PagedBlocks::uncache_past).
  PagedBlocks* paged_blocks() { return const_cast<PagedBlocks*>(paged()); }
  // The deferred-growth protocol (paged); without it the engine calls grow_to_at_least() for
  // every token.
  virtual DeferredGrowth* deferred_growth() { return nullptr; }
  // The torch caching allocator the store allocates through; GpuMemoryPool routes activations
  // through it when present.
  virtual CachingAllocator* caching_allocator() { return nullptr; }
  virtual const CachingAllocator* caching_allocator() const { return nullptr; }
  // Where the store reports its prefix cache's blocks (kv_events.h): a paged store with prefix
  // caching reports each key that becomes findable or stops being findable; other stores report
  // nothing (they cache no prefix a router could use).
  virtual void set_event_sink(KvEventSink /*sink*/) {}
};

// vLLM's memory for KV cache: floor(capacity x the node's gpu_memory_utilization (0.9)) less
// everything that is not KV (the available_memory vLLM's profile run hands get_kv_cache_configs).
// Throws ConfigError at `node` when nothing is left for `what`.
int64_t kv_bytes_from_utilization(const ConfigNode& node, const KvBudget& budget, const char* what);

// Builds a store from a `kv:` node: `type: paged|contiguous|caching_allocator` plus that type's
// keys (docs/memory.md lists them); unknown keys are ConfigErrors with file:line:col.
//   paged:             block_size (16), num_blocks | gpu_memory_utilization (0.9),
//   enable_prefix_caching contiguous:        reserve (max_len|prompt_plus_max_new|pow2|exact), fit
//   (first|best),
//                      max_len (model max_position), gpu_memory_utilization (0.9)
//   caching_allocator: growth (preallocate|concat|chunked), chunk_tokens (256), max_split_size_mb
// Throws ConfigError when the budget leaves no room for KV.
std::unique_ptr<KvStore> make_kv_store(const ConfigNode& kv_node, const ModelSpec& model,
                                       const GpuSpec& gpu, const KvBudget& budget);

}  // namespace kvsim
