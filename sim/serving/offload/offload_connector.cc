#include "sim/serving/offload/offload_connector.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace kvsim {

namespace {

// The tier's size in blocks: each GPU of the replica holds its shard of every block in its
// share of the buffer (vLLM's CPUOffloadingSpec divides kv_offloading_size over the world).
int64_t capacity_blocks(double size_gib, const OffloadConnector::Link& l, int64_t block_bytes) {
  const double per_gpu = size_gib * 1073741824.0 / l.tensor_parallel;
  return static_cast<int64_t>(std::floor(per_gpu / static_cast<double>(block_bytes)));
}

}  // namespace

OffloadConnector::OffloadConnector(const KvOffloadingConfig& config, Link link, EventQueue& events,
                                   OffloadStats& stats, std::function<void(int64_t id)> loaded)
    : tier_(capacity_blocks(
                config.size_gib, link,
                link.gpu_block_tokens * config.block_size_multiple * link.kv_bytes_per_token),
            config.eviction_policy == "arc" ? OffloadEviction::kArc : OffloadEviction::kLru),
      block_tokens_(link.gpu_block_tokens * config.block_size_multiple),
      block_bytes_(block_tokens_ * link.kv_bytes_per_token),
      bytes_per_s_(link.bytes_per_s),
      events_(events),
      stats_(stats),
      loaded_(std::move(loaded)) {
  KVSIM_CHECK(bytes_per_s_ > 0, "kv_offloading needs the GPU's host link bandwidth");
  stats_.backend = config.backend;
  stats_.block_tokens = block_tokens_;
  stats_.block_bytes = block_bytes_;
  stats_.capacity_blocks = tier_.capacity_blocks();
  stats_.eviction_policy = config.eviction_policy;
  stats_.store_threshold = config.store_threshold;
  if (config.store_threshold >= 2) reuse_.emplace(config.store_threshold, config.max_tracker_size);
  if (config.disk) set_up_disk(*config.disk, link);
}

void OffloadConnector::set_up_disk(const DiskTierConfig& d, const Link& link) {
  disk_.emplace(capacity_blocks(d.size_gib, link, block_bytes_));
  // The node's disk serves every rank of the replica at once: each moves its shard at its share.
  disk_read_bytes_per_s_ = d.read_gb_per_s * 1e9 / link.tensor_parallel;
  disk_write_bytes_per_s_ = d.write_gb_per_s * 1e9 / link.tensor_parallel;
  disk_latency_s_ = d.latency_us * 1e-6;
  stats_.disk.emplace();
  stats_.disk->capacity_blocks = disk_->capacity_blocks();
}

int64_t OffloadConnector::keyable_blocks(const RequestState& r) const {
  const int64_t hb = r.spec.hash_block_tokens;
  if (hb <= 0 || r.spec.prefix_hashes.empty()) return 0;
  const int64_t covered =
      std::min<int64_t>(r.prompt_tokens, static_cast<int64_t>(r.spec.prefix_hashes.size()) * hb);
  return covered / block_tokens_;
}

uint64_t OffloadConnector::key(const RequestState& r, int64_t i) const {
  return offload_block_key(r.spec.prefix_hashes, r.spec.hash_block_tokens, i, block_tokens_);
}

std::vector<uint64_t> OffloadConnector::keys(const RequestState& r, int64_t from,
                                             int64_t to) const {
  std::vector<uint64_t> out;
  for (int64_t i = from; i < to; ++i) out.push_back(key(r, i));
  return out;
}

int64_t OffloadConnector::matched_tokens(const RequestState& r, int64_t gpu_cached,
                                         int64_t target) {
  // Whole blocks, at most up to the prompt's last token (which is always computed: the GPU
  // lookup's max_cache_hit_length = num_tokens - 1, applied to the tier as well).
  const int64_t n = std::min(keyable_blocks(r), (target - 1) / block_tokens_);
  const std::vector<uint64_t> all = keys(r, 0, n);
  tier_.touch(all);
  if (disk_) disk_->touch(all);
  if (n * block_tokens_ - gpu_cached < block_tokens_) return 0;  // less than a block to load
  const int64_t start = gpu_cached / block_tokens_;
  const std::span<const uint64_t> rest =
      std::span<const uint64_t>(all).subspan(static_cast<size_t>(start));
  if (reuse_) reuse_->record(rest);  // the keys the tier's lookup walks
  int64_t hits = tier_.lookup(rest);
  // Past the CPU tier's run, the disk tier's (LMCache looks its backends up in order).
  if (disk_) hits += disk_->lookup(rest.subspan(static_cast<size_t>(hits)));
  const int64_t hit = (start + hits) * block_tokens_ - gpu_cached;
  return hit < block_tokens_ ? 0 : hit;
}

SimTime OffloadConnector::transfer(int64_t blocks, SimTime& free_at, double& busy_s) {
  return transfer_for(static_cast<double>(blocks * block_bytes_) / bytes_per_s_, events_.now(),
                      free_at, busy_s);
}

SimTime OffloadConnector::transfer_for(double s, SimTime earliest, SimTime& free_at,
                                       double& busy_s) {
  const SimTime start = std::max(earliest, free_at);
  free_at = start + seconds_to_sim(s);
  busy_s += s;
  return free_at;
}

void OffloadConnector::start_load(const RequestState& r, int64_t gpu_cached, int64_t hit) {
  const int64_t from = gpu_cached / block_tokens_;
  const int64_t to = (gpu_cached + hit) / block_tokens_;
  std::vector<uint64_t> ks = keys(r, from, to);
  // The leading blocks come from the CPU tier, the rest (matched_tokens' disk run) from disk.
  const auto cpu_blocks = static_cast<size_t>(tier_.lookup(ks));
  std::vector<uint64_t> from_disk(ks.begin() + static_cast<std::ptrdiff_t>(cpu_blocks), ks.end());
  ks.resize(cpu_blocks);
  tier_.prepare_load(ks);
  ++stats_.loads;
  stats_.loaded_blocks += to - from;
  // Loaded blocks are in the tier already: the request's stores start after them.
  next_store_[r.spec.id] = std::max(next_store_[r.spec.id], to);
  // Disk blocks are read into host memory first; then every block crosses the host link.
  const SimTime read_end = from_disk.empty() ? events_.now() : read_from_disk(from_disk);
  const double s = static_cast<double>((to - from) * block_bytes_) / bytes_per_s_;
  const SimTime end = transfer_for(s, read_end, h2d_free_at_, stats_.load_busy_s);
  const int64_t id = r.spec.id;
  events_.schedule_at(end, [this, id, ks = std::move(ks), from_disk = std::move(from_disk)] {
    tier_.complete_load(ks);
    if (!from_disk.empty()) disk_->complete_load(from_disk);
    loaded_(id);
  });
}

void OffloadConnector::plan_store(const RequestState& r, int64_t tokens) {
  const int64_t n = std::min(keyable_blocks(r), tokens / block_tokens_);
  int64_t& next = next_store_[r.spec.id];
  if (n <= next) return;
  std::vector<uint64_t> ks = keys(r, next, n);
  if (reuse_) {  // blocks not seen often enough are not stored (and not tried again)
    const auto before = static_cast<int64_t>(ks.size());
    std::erase_if(ks, [this](uint64_t k) { return !reuse_->eligible(k); });
    stats_.gated_blocks += before - static_cast<int64_t>(ks.size());
  }
  std::optional<OffloadTier::StorePlan> plan = tier_.prepare_store(ks);
  if (!plan) {
    ++stats_.skipped_stores;  // vLLM: "cannot store", tried again with the next chunk
    return;
  }
  next = n;
  emit(plan->evicted, /*removed=*/true, KvMedium::kCpu);
  if (disk_ && !plan->evicted.empty()) demote(plan->evicted);
  stats_.stored_blocks += static_cast<int64_t>(plan->to_store.size());
  stats_.evicted_blocks += static_cast<int64_t>(plan->evicted.size());
  stats_.peak_blocks = std::max(stats_.peak_blocks, tier_.occupied_blocks());
  if (plan->to_store.empty()) return;
  tier_.touch(keys(r, 0, n));
  planned_.insert(planned_.end(), plan->to_store.begin(), plan->to_store.end());
}

void OffloadConnector::forward_ended() {
  if (planned_.empty()) return;
  const SimTime end =
      transfer(static_cast<int64_t>(planned_.size()), d2h_free_at_, stats_.store_busy_s);
  events_.schedule_at(end, [this, ks = std::move(planned_)] {
    tier_.complete_store(ks);
    emit(ks, /*removed=*/false, KvMedium::kCpu);
  });
  planned_ = {};
}

void OffloadConnector::emit(std::span<const uint64_t> keys, bool removed, KvMedium medium) const {
  if (!sink_) return;
  for (const uint64_t k : keys) {
    sink_({.medium = medium, .removed = removed, .key = k, .block_tokens = block_tokens_});
  }
}

TierSamples OffloadConnector::sample() const {
  TierSamples t{.cpu = {.blocks = tier_.occupied_blocks(),
                        .bytes = tier_.occupied_blocks() * block_bytes_,
                        .stored_blocks = stats_.stored_blocks,
                        .evicted_blocks = stats_.evicted_blocks}};
  if (disk_) {
    t.disk = TierSample{.blocks = disk_->occupied_blocks(),
                        .bytes = disk_->occupied_blocks() * block_bytes_,
                        .stored_blocks = stats_.disk->stored_blocks,
                        .evicted_blocks = stats_.disk->evicted_blocks};
  }
  return t;
}

void OffloadConnector::check() const {
  tier_.check_invariants();
  KVSIM_CHECK(stats_.stored_blocks - stats_.evicted_blocks == tier_.occupied_blocks(),
              "kv_offloading: {} blocks stored - {} evicted != {} in the tier",
              stats_.stored_blocks, stats_.evicted_blocks, tier_.occupied_blocks());
  if (disk_) check_disk();
}

}  // namespace kvsim
