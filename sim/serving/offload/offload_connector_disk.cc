// The disk tier under the CPU tier (engine.kv_offloading.disk), in the manner of LMCache's
// LocalDiskBackend (lmcache/v1/storage_backend/local_disk_backend.py) below its LocalCPUBackend:
// the blocks the CPU tier evicts are written to disk (the CPU tier keeps hot blocks, the disk the
// rest), a prefix's run past the CPU tier's is looked up on disk, and a load reads those blocks
// back into host memory before the whole prefix crosses the GPU's host link. The disk is another
// OffloadTier (LRU, pins while read, ready when its write ends), with its own bandwidth each way
// and a latency per transfer; reads and writes queue on their own directions.
#include "core/check.h"
#include "sim/serving/offload/offload_connector.h"

namespace kvsim {

void OffloadConnector::demote(const std::vector<uint64_t>& keys) {
  DiskTierStats& d = *stats_.disk;
  std::optional<OffloadTier::StorePlan> plan = disk_->prepare_store(keys);
  if (!plan) {  // every disk block is being read or written: these are lost
    d.dropped_blocks += static_cast<int64_t>(keys.size());
    return;
  }
  emit(plan->evicted, /*removed=*/true, KvMedium::kDisk);
  d.stored_blocks += static_cast<int64_t>(plan->to_store.size());
  d.evicted_blocks += static_cast<int64_t>(plan->evicted.size());
  d.peak_blocks = std::max(d.peak_blocks, disk_->occupied_blocks());
  if (plan->to_store.empty()) return;
  const auto n = static_cast<double>(plan->to_store.size());
  const double s =
      disk_latency_s_ + n * static_cast<double>(block_bytes_) / disk_write_bytes_per_s_;
  const SimTime end = transfer_for(s, events_.now(), disk_write_free_at_, d.write_busy_s);
  events_.schedule_at(end, [this, ks = std::move(plan->to_store)] {
    disk_->complete_store(ks);
    emit(ks, /*removed=*/false, KvMedium::kDisk);
  });
}

SimTime OffloadConnector::read_from_disk(const std::vector<uint64_t>& keys) {
  DiskTierStats& d = *stats_.disk;
  disk_->prepare_load(keys);
  d.loaded_blocks += static_cast<int64_t>(keys.size());
  const auto n = static_cast<double>(keys.size());
  const double s = disk_latency_s_ + n * static_cast<double>(block_bytes_) / disk_read_bytes_per_s_;
  return transfer_for(s, events_.now(), disk_read_free_at_, d.read_busy_s);
}

void OffloadConnector::check_disk() const {
  disk_->check_invariants();
  const DiskTierStats& d = *stats_.disk;
  KVSIM_CHECK(d.stored_blocks - d.evicted_blocks == disk_->occupied_blocks(),
              "kv_offloading disk: {} blocks stored - {} evicted != {} on disk", d.stored_blocks,
              d.evicted_blocks, disk_->occupied_blocks());
}

}  // namespace kvsim
