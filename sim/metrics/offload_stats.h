// A policy's KV offloading figures (engine.kv_offloading; sim/serving/offload/): the CPU tier's
// size, its hits, and the bytes that crossed the host link each way. Tokens are counted at a
// request's first admission (as the GPU prefix figures are): `query_tokens` are the prompt
// tokens the GPU prefix cache did not hold, `hit_tokens` those of them loaded from the tier.
// Bytes are per GPU (each tensor-parallel rank moves its own shard over its own link).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

namespace kvsim {

// The disk tier under the CPU tier (engine.kv_offloading.disk), per GPU as the CPU tier's.
struct DiskTierStats {
  int64_t capacity_blocks = 0;
  int64_t loaded_blocks = 0;   // blocks read back for loads
  int64_t stored_blocks = 0;   // the CPU tier's evicted blocks written to it
  int64_t evicted_blocks = 0;  // blocks evicted from it
  int64_t dropped_blocks = 0;  // evicted CPU blocks it could not take (nothing evictable)
  int64_t peak_blocks = 0;
  double read_busy_s = 0;   // disk time spent reading for loads
  double write_busy_s = 0;  // disk time spent writing evicted blocks

  void merge(const DiskTierStats& o) {
    capacity_blocks += o.capacity_blocks;
    loaded_blocks += o.loaded_blocks;
    stored_blocks += o.stored_blocks;
    evicted_blocks += o.evicted_blocks;
    dropped_blocks += o.dropped_blocks;
    peak_blocks = std::max(peak_blocks, o.peak_blocks);
    read_busy_s += o.read_busy_s;
    write_busy_s += o.write_busy_s;
  }
};

// Which offloading columns the result files carry: set for the whole scenario (one header for
// every policy) when some policy configures engine.kv_offloading (`tiers`) and some a disk tier
// under it (`disk`); a policy without the tier leaves its cells empty. All false: the files keep
// the bytes they have without offloading.
struct OffloadColumns {
  bool tiers = false;
  bool disk = false;
};

// One offload tier at a timeseries sample, per GPU: its occupancy and its cumulative stores and
// evictions (checking mode asks stored - evicted = blocks at every sample).
struct TierSample {
  int64_t blocks = 0;
  int64_t bytes = 0;
  int64_t stored_blocks = 0;
  int64_t evicted_blocks = 0;
};

// The tiers of one replica at a sample (the disk: with engine.kv_offloading.disk).
struct TierSamples {
  TierSample cpu;
  std::optional<TierSample> disk;
};

struct OffloadStats {
  std::string backend;
  std::string eviction_policy = "lru";
  int64_t store_threshold = 0;  // reuse gating (>= 2: on)
  int64_t block_tokens = 0;     // tokens of one offloaded block
  int64_t block_bytes = 0;      // its bytes on one GPU
  int64_t capacity_blocks = 0;  // the tier's size in offloaded blocks
  int64_t query_tokens = 0;
  int64_t hit_tokens = 0;
  int64_t loads = 0;  // requests that waited for a load (WAITING_FOR_REMOTE_KVS)
  int64_t loaded_blocks = 0;
  int64_t stored_blocks = 0;          // blocks written to the tier
  int64_t evicted_blocks = 0;         // blocks evicted from it
  int64_t skipped_stores = 0;         // store requests refused: nothing evictable (vLLM logs them)
  int64_t gated_blocks = 0;           // blocks not stored: seen fewer than store_threshold times
  int64_t peak_blocks = 0;            // the tier's peak occupancy
  double load_busy_s = 0;             // host-to-device link time spent on loads
  double store_busy_s = 0;            // device-to-host link time spent on stores
  std::optional<DiskTierStats> disk;  // with a disk tier
  // The served requests' TTFT split, summed: queueing (guard queue and the engine's waiting
  // queue, less loading), loading (the tiers' loads before the first scheduling) and prefill
  // (first scheduling to first token, preemptions included).
  int64_t ttft_count = 0;
  double ttft_queueing_s = 0, ttft_loading_s = 0, ttft_prefill_s = 0;

  double hit_rate() const {
    return query_tokens > 0 ? static_cast<double>(hit_tokens) / static_cast<double>(query_tokens)
                            : 0;
  }
  int64_t loaded_bytes() const { return loaded_blocks * block_bytes; }
  int64_t stored_bytes() const { return stored_blocks * block_bytes; }
  void merge(const OffloadStats& o) {
    capacity_blocks += o.capacity_blocks;
    query_tokens += o.query_tokens;
    hit_tokens += o.hit_tokens;
    loads += o.loads;
    loaded_blocks += o.loaded_blocks;
    stored_blocks += o.stored_blocks;
    evicted_blocks += o.evicted_blocks;
    skipped_stores += o.skipped_stores;
    gated_blocks += o.gated_blocks;
    ttft_count += o.ttft_count;
    ttft_queueing_s += o.ttft_queueing_s;
    ttft_loading_s += o.ttft_loading_s;
    ttft_prefill_s += o.ttft_prefill_s;
    peak_blocks = std::max(peak_blocks, o.peak_blocks);
    load_busy_s += o.load_busy_s;
    store_busy_s += o.store_busy_s;
    if (o.disk) {
      if (!disk) disk.emplace();
      disk->merge(*o.disk);
    }
  }
};

}  // namespace kvsim
