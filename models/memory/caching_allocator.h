// A model of PyTorch's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp; constants and rules
// in shared/reference/facts.md §3), one stream, no expandable segments:
//   - requests rounded up to 512 B; <= 1 MiB goes to the small pool, larger to the large pool;
//   - a miss cudaMallocs a segment: 2 MiB (small), 20 MiB (large < 10 MiB), else rounded to 2 MiB;
//   - best fit over the pool's free blocks ordered by (size, address); a block is split when the
//     remainder is >= 512 B (small) or > 1 MiB and the request < max_split_size (large);
//   - a request < max_split_size never takes a cached block >= max_split_size; a request >=
//     max_split_size takes one only if it is < request + 20 MiB;
//   - freed blocks merge with free neighbours of the same segment and stay cached (reserved);
//   - before an OOM: free oversize cached blocks (max_split_size), then every unsplit cached
//     segment (empty_cache), and retry.
// Memory is simulated: a "pointer" is an offset in a virtual address space; nothing is touched.
#pragma once

#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "models/memory/kv_store.h"

namespace kvsim {

inline constexpr int64_t kCaMinBlockSize = 512;
inline constexpr int64_t kCaSmallSize = 1048576;       // largest small request: 1 MiB
inline constexpr int64_t kCaSmallBuffer = 2097152;     // small segments: 2 MiB
inline constexpr int64_t kCaLargeBuffer = 20971520;    // large segments for requests < 10 MiB
inline constexpr int64_t kCaMinLargeAlloc = 10485760;  // 10 MiB
inline constexpr int64_t kCaRoundLarge = 2097152;      // larger segments rounded to 2 MiB

using CaBlockId = int32_t;  // handle of a live allocation; -1 is none

struct CachingAllocatorStats {
  int64_t allocated_bytes = 0;  // live blocks, rounded/split sizes (memory_allocated)
  int64_t requested_bytes = 0;  // live blocks, sizes as asked
  int64_t reserved_bytes = 0;   // segments held (memory_reserved)
  int64_t segments = 0;
  int64_t num_alloc_retries = 0;  // mallocs that needed the free-cache-and-retry step
  int64_t num_ooms = 0;
  int64_t num_device_allocs = 0;  // cudaMalloc calls
  int64_t num_device_frees = 0;   // cudaFree calls
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
};

class CachingAllocator {
 public:
  // `device_limit_bytes`: what cudaMalloc may hand this allocator in total (the device's free
  // memory when the allocator started). `max_split_size_bytes`: PYTORCH_CUDA_ALLOC_CONF's
  // max_split_size_mb in bytes (unlimited by default).
  explicit CachingAllocator(int64_t device_limit_bytes,
                            int64_t max_split_size_bytes = std::numeric_limits<int64_t>::max());

  // torch's malloc. On success `*out` is the new block; on failure nothing is allocated, the
  // cache may have been emptied (as PyTorch does), and the result says why.
  // Requires: size > 0.
  AllocResult malloc(int64_t size, CaBlockId* out);
  // Returns the block to its pool (merging with free neighbours); the segment stays reserved.
  // Requires: `block` live (a double free is an InvariantError).
  void free(CaBlockId block);
  // torch.cuda.empty_cache(): cudaFree every cached segment that is entirely free.
  void empty_cache();

  int64_t block_size(CaBlockId block) const;  // rounded size. Requires: live
  const CachingAllocatorStats& stats() const { return stats_; }
  int64_t cached_bytes() const { return stats_.reserved_bytes - stats_.allocated_bytes; }
  int64_t device_limit_bytes() const { return device_limit_bytes_; }
  // What cudaMalloc could still hand out: limit - reserved.
  int64_t device_free_bytes() const { return device_limit_bytes_ - stats_.reserved_bytes; }
  // Cached free bytes in blocks that cannot serve a request of `size` bytes under the pool and
  // max_split_size rules (external fragmentation for that size).
  int64_t cached_bytes_unusable_for(int64_t size) const;
  // The largest cached free block.
  int64_t largest_cached_block() const;

  static int64_t round_size(int64_t size);
  static int64_t segment_size(int64_t rounded);  // get_allocation_size
  static bool is_small(int64_t rounded) { return rounded <= kCaSmallSize; }

  // KVSIM_CHECK: blocks of each segment tile it exactly, no two adjacent free blocks, pool sets
  // hold exactly the free blocks, stats add up, reserved >= allocated, reserved <= limit.
  void check_invariants() const;

 private:
  struct Block {
    int64_t addr = 0;
    int64_t size = 0;
    int64_t requested = 0;
    int32_t prev = -1;  // neighbours inside the same segment (address order); both -1: the
                        // block is a whole segment
    int32_t next = -1;
    bool allocated = false;
    bool small = false;
    bool in_use_slot = false;  // the slot holds a block (false: on the slot free list)
  };
  struct FreeKey {
    int64_t size;
    int64_t addr;
    int32_t id;
    bool operator<(const FreeKey& o) const {
      return size != o.size ? size < o.size : addr < o.addr;
    }
  };
  using Pool = std::set<FreeKey>;

  int32_t new_slot();
  void drop_slot(int32_t id);
  Pool& pool_of(bool small) { return small ? small_pool_ : large_pool_; }
  const Pool& pool_of(bool small) const { return small ? small_pool_ : large_pool_; }
  int32_t get_free_block(int64_t rounded, bool small);
  int32_t alloc_segment(int64_t rounded, bool small);  // -1 when the device has no room
  void release_segment(int32_t id);
  bool release_available_cached_blocks(int64_t rounded);
  void release_cached_blocks();
  CaBlockId take(int32_t id, int64_t rounded, int64_t requested);
  AllocResult oom(int64_t rounded);
  bool should_split(const Block& b, int64_t rounded) const;

  int64_t device_limit_bytes_;
  int64_t max_split_size_;
  int64_t next_addr_ = 0;  // virtual addresses are never reused: segments are told apart
  std::vector<Block> blocks_;
  std::vector<int32_t> free_slots_;
  Pool small_pool_;
  Pool large_pool_;
  CachingAllocatorStats stats_;
};

}  // namespace kvsim
