// Where every byte of one GPU replica is at one instant: eight categories that always sum to the
// GPU's capacity, plus the three views a guard can read (torch allocated, torch reserved, and the
// driver's free figure as cudaMemGetInfo reports it).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace kvsim {

// The categories, in the order they are laid out by MemorySnapshot::category_at().
enum class MemCategory {
  kContext,         // CUDA context: outside every allocator, visible only to the driver
  kWeights,         // model weights (torch allocated)
  kWorkspace,       // non-torch runtime workspace (cuBLAS, NCCL, CUDA graphs)
  kActivations,     // activation bytes held for the current iteration
  kKvLive,          // bytes of live token state (shared prefix blocks counted once)
  kKvWaste,         // held by the KV store for requests but not live: internal + reservation
  kKvFree,          // preallocated KV capacity held by no request (free blocks, arena holes)
  kAllocatorCache,  // reserved by the caching allocator but unallocated (cached segments)
  kFree,            // not reserved by anything: what the driver could still hand out
};
inline constexpr int kMemCategoryCount = 9;

std::string_view mem_category_name(MemCategory c);  // "context", "weights", ..., "free"

struct MemorySnapshot {
  int64_t capacity_bytes = 0;  // GpuSpec::memory_bytes

  // The categories (sum == capacity_bytes).
  int64_t context_bytes = 0;
  int64_t weights_bytes = 0;
  int64_t workspace_bytes = 0;
  int64_t activation_bytes = 0;
  int64_t kv_live_bytes = 0;
  int64_t kv_waste_bytes = 0;
  int64_t kv_free_bytes = 0;
  int64_t allocator_cache_bytes = 0;
  int64_t free_bytes = 0;

  // kv_waste split by kind (see docs/memory.md for the one definition), plus the external
  // fragmentation, which lives inside kv_free (arena holes) or allocator_cache (cached blocks).
  int64_t kv_internal_bytes = 0;
  int64_t kv_reservation_bytes = 0;
  int64_t kv_external_bytes = 0;

  // The views a guard reads.
  int64_t torch_allocated_bytes = 0;  // torch.cuda.memory_allocated(): live rounded blocks
  int64_t torch_reserved_bytes = 0;   // torch.cuda.memory_reserved(): every segment held
  int64_t driver_free_bytes = 0;  // cudaMemGetInfo free: capacity - context - reserved - workspace

  int64_t category_bytes(MemCategory c) const;
  // In the header: the recorder reads it twice per iteration.
  std::array<int64_t, kMemCategoryCount> categories() const {
    return {context_bytes,  weights_bytes, workspace_bytes,       activation_bytes, kv_live_bytes,
            kv_waste_bytes, kv_free_bytes, allocator_cache_bytes, free_bytes};
  }
  int64_t category_sum() const;
  // Bytes held for KV: live + internal + reservation + external (the denominator of the
  // fractions below).
  int64_t kv_footprint_bytes() const;
  // The category that holds byte `offset` in the fixed layout order of MemCategory (a cheap
  // query: nine comparisons). Requires: 0 <= offset < capacity_bytes.
  MemCategory category_at(int64_t offset) const;
  // KVSIM_CHECK: categories sum to capacity, none negative, reserved >= allocated,
  // driver_free <= free (physical), waste split adds up.
  void check() const;
};

// Field by field a - b: how a state moved (the fast-forward records states affine in a batch's
// growth as a start and such moves).
MemorySnapshot snapshot_difference(const MemorySnapshot& a, const MemorySnapshot& b);
// Field by field a + k·b: a state moved k times by b.
MemorySnapshot snapshot_plus(const MemorySnapshot& a, int64_t k, const MemorySnapshot& b);

}  // namespace kvsim
