// The scheduler side of vLLM's native KV offloading (OffloadingConnectorScheduler,
// vllm/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py) over one CPU tier
// (models/memory/offload/offload_tier.h), with the host link's time:
//  - matched_tokens (get_num_new_matched_tokens): after the GPU prefix hit, how many more prompt
//    tokens the tier holds, in whole offloaded blocks; the request's blocks are touched.
//  - start_load (update_state_after_alloc): the hit blocks are pinned and copied host-to-device
//    on the GPU's PCIe link, after the loads before them; the `loaded` callback fires at the end
//    (the request waits in WAITING_FOR_REMOTE_KVS meanwhile: RunQueues, Phase::kLoading).
//  - plan_store (build_connector_meta's _get_reqs_to_store): a scheduled prefill chunk's new
//    full offloaded blocks get tier slots at once (prepare_store, which evicts), and
//  - forward_ended: the step's stores then copy device-to-host, overlapped with the next steps
//    (the worker submits them once the step's KV is written), after the stores before them;
//    at their end the blocks become ready (complete_store).
// A block is keyed by the prefix hash of its last token: only blocks inside the prompt's hashes
// are offloaded (kvsim hashes prompts, not generated tokens).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/sim_time.h"
#include "models/memory/kv_events.h"
#include "models/memory/offload/offload_tier.h"
#include "models/memory/offload/reuse_tracker.h"
#include "sim/engine/event_queue.h"
#include "sim/metrics/offload_stats.h"
#include "sim/request/request_state.h"
#include "sim/serving/offload/kv_offloading_config.h"

namespace kvsim {

class OffloadConnector {
 public:
  struct Link {
    int64_t gpu_block_tokens = 16;
    int64_t kv_bytes_per_token = 0;  // on one GPU
    double bytes_per_s = 0;          // the GPU's host link, one direction
    int tensor_parallel = 1;         // the replica's GPUs: the tier's bytes are split over them
  };
  // `events` and `stats` are borrowed (stats: the recorder's, filled in as it runs); `loaded`
  // is called with a request's id when its load ends.
  OffloadConnector(const KvOffloadingConfig& config, Link link, EventQueue& events,
                   OffloadStats& stats, std::function<void(int64_t id)> loaded);

  int64_t block_tokens() const { return block_tokens_; }
  // Tokens past `gpu_cached` that a load would bring, 0 when none (less than one block).
  int64_t matched_tokens(const RequestState& r, int64_t gpu_cached, int64_t target);
  // Starts the load of `hit` tokens after `gpu_cached` (matched_tokens' answer) for `r`.
  void start_load(const RequestState& r, int64_t gpu_cached, int64_t hit);
  // `r` is scheduled up to `tokens` computed tokens by the step being launched.
  void plan_store(const RequestState& r, int64_t tokens);
  // The step's forward pass ended: its planned stores start.
  void forward_ended();
  // `id` ended: its store position is forgotten (request_finished).
  void request_finished(int64_t id) { next_store_.erase(id); }
  // Where the tier's blocks are reported (kv_events.h, medium CPU): stored when its store ends
  // (the block is then findable), removed when it is evicted, as vLLM's OffloadingConnector
  // publishes its manager's OffloadingEvents.
  void set_event_sink(KvEventSink sink) { sink_ = std::move(sink); }
  const OffloadTier& tier() const { return tier_; }
  // The tiers' occupancy and cumulative stores and evictions now (a timeseries sample).
  TierSamples sample() const;
  // KVSIM_CHECK: the tier's accounting (stored - evicted = occupancy), and the stats agree.
  void check() const;

 private:
  // Key of `r`'s offloaded block i (< keyable_blocks).
  uint64_t key(const RequestState& r, int64_t i) const;
  int64_t keyable_blocks(const RequestState& r) const;
  std::vector<uint64_t> keys(const RequestState& r, int64_t from, int64_t to) const;
  // A transfer of `blocks` blocks on a link free at `free_at`: its end; the link is busy until
  // then.
  SimTime transfer(int64_t blocks, SimTime& free_at, double& busy_s);
  // A transfer of `s` seconds starting at `earliest` or when the link is free, if later.
  SimTime transfer_for(double s, SimTime earliest, SimTime& free_at, double& busy_s);
  void emit(std::span<const uint64_t> keys, bool removed, KvMedium medium) const;

  // The disk tier (offload_connector_disk.cc).
  void set_up_disk(const DiskTierConfig& d, const Link& link);
  // The CPU tier evicted `keys`: they are written to disk (those not there yet).
  void demote(const std::vector<uint64_t>& keys);
  // Pins `keys` (ready on disk) and reads them into host memory: the read's end.
  SimTime read_from_disk(const std::vector<uint64_t>& keys);
  void check_disk() const;

  OffloadTier tier_;
  int64_t block_tokens_;
  int64_t block_bytes_;  // on one GPU
  double bytes_per_s_;
  EventQueue& events_;
  OffloadStats& stats_;
  std::function<void(int64_t)> loaded_;
  SimTime h2d_free_at_ = 0;
  SimTime d2h_free_at_ = 0;
  std::unordered_map<int64_t, int64_t> next_store_;  // request -> its next block to store
  std::vector<uint64_t> planned_;                    // the launched step's stores
  KvEventSink sink_;
  std::optional<ReuseTracker> reuse_;  // with store_threshold >= 2
  std::optional<OffloadTier> disk_;    // with engine.kv_offloading.disk
  double disk_read_bytes_per_s_ = 0;   // this GPU's share of the disk's bandwidth
  double disk_write_bytes_per_s_ = 0;
  double disk_latency_s_ = 0;
  SimTime disk_read_free_at_ = 0;
  SimTime disk_write_free_at_ = 0;
};

}  // namespace kvsim
