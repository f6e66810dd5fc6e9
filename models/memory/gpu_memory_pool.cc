#include "models/memory/gpu_memory_pool.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/config_node.h"
#include "core/errors.h"
#include "core/units.h"

namespace kvsim {

namespace {

// The budget of one GPU holding `share` (a gpu_share, or the whole model on one GPU).
KvBudget budget_of(const ModelSpec& model, const GpuSpec& gpu, const PoolOptions& options) {
  KvBudget b;
  b.capacity_bytes = gpu.memory_bytes;
  b.context_bytes = gpu.context_reserve_bytes;
  b.weights_bytes = model.weights_bytes();
  b.workspace_bytes = options.workspace_bytes;
  b.activation_peak_bytes = profile_activation_peak_bytes(
      model, options.profile_batched_tokens, options.profile_num_seqs, options.attention);
  return b;
}

// `v`, passed through a register. usage() has just written its fields as 8-byte stores; copied
// as they are, adjacent fields became one 16-byte load, which the CPU cannot forward from those
// stores (a stall of a dozen cycles, most of snapshot()'s time: the recorder takes two
// snapshots an iteration). The empty asm keeps each field's load its own.
int64_t scalar_load(int64_t v) {
#if defined(__GNUC__)
  asm("" : "+r"(v));
#endif
  return v;
}

}  // namespace

ModelSpec GpuMemoryPool::sizing_share(const ModelSpec& model, const GpuSpec& gpu,
                                      const PoolOptions& options) {
  const Parallelism par = options.parallelism;
  if (par.single()) return model;
  ModelSpec best;
  double best_tokens = 0;
  for (int stage = 0; stage < par.pipeline; ++stage) {
    ModelSpec share = gpu_share(model, par, stage);
    const KvBudget b = budget_of(share, gpu, options);
    // KV tokens this stage's GPUs have room for; the first stage wins ties.
    const double tokens =
        static_cast<double>(b.device_bytes_for_torch() - b.activation_peak_bytes) /
        static_cast<double>(share.kv_bytes_per_token());
    if (stage == 0 || tokens < best_tokens) {
      best = std::move(share);
      best_tokens = tokens;
    }
  }
  return best;
}

KvBudget GpuMemoryPool::budget_for(const ModelSpec& model, const GpuSpec& gpu,
                                   const PoolOptions& options) {
  return budget_of(sizing_share(model, gpu, options), gpu, options);
}

GpuMemoryPool::GpuMemoryPool(const ModelSpec& model, const GpuSpec& gpu, const ConfigNode& kv_node,
                             PoolOptions options)
    : model_(sizing_share(model, gpu, options)),
      gpu_(gpu),
      options_(options),
      budget_(budget_of(model_, gpu, options)) {
  if (budget_.device_bytes_for_torch() < 0) {
    const std::string per_gpu =
        options.parallelism.single()
            ? std::string()
            : fmt::format(" per GPU at {}", parallelism_text(options.parallelism));
    throw InputError(fmt::format(
        "{}: model {} ({:.2f} GiB of weights{}) does not fit on {} ({:.2f} GiB with {:.2f} GiB of "
        "context and workspace)",
        kv_node.where(), model.name, to_gib(budget_.weights_bytes), per_gpu, gpu.name,
        to_gib(budget_.capacity_bytes), to_gib(budget_.context_bytes + budget_.workspace_bytes)));
  }
  store_ = make_kv_store(kv_node, model_, gpu_, budget_);
}

GpuMemoryPool::GpuMemoryPool(const ModelSpec& model, const GpuSpec& gpu,
                             std::unique_ptr<KvStore> store, PoolOptions options)
    : model_(sizing_share(model, gpu, options)),
      gpu_(gpu),
      options_(options),
      budget_(budget_of(model_, gpu, options)),
      store_(std::move(store)) {
  KVSIM_CHECK(store_ != nullptr, "GpuMemoryPool needs a store");
}

void GpuMemoryPool::fill_views(AllocResult& r) const {
  const MemorySnapshot s = snapshot();
  r.torch_allocated_bytes = s.torch_allocated_bytes;
  r.torch_reserved_bytes = s.torch_reserved_bytes;
  r.driver_free_bytes = s.driver_free_bytes;
}

AllocResult GpuMemoryPool::allocate_kv(RequestId request, int64_t prompt_tokens,
                                       int64_t max_total_tokens, const PrefixHashes& prefix) {
  AllocResult r = store_->allocate(request, prompt_tokens, max_total_tokens, prefix);
  if (!r) fill_views(r);
  return r;
}

AllocResult GpuMemoryPool::grow_kv(RequestId request, int64_t new_total_tokens) {
  AllocResult r = store_->grow(request, new_total_tokens);
  if (!r) fill_views(r);
  return r;
}

AllocResult GpuMemoryPool::ensure_kv(RequestId request, int64_t tokens) {
  AllocResult r = store_->grow_to_at_least(request, tokens);
  if (!r) fill_views(r);
  return r;
}

void GpuMemoryPool::release_kv(RequestId request) { store_->release(request); }

AllocResult GpuMemoryPool::reserve_activations(int64_t bytes) {
  KVSIM_CHECK(activation_bytes_ == 0 && activation_block_ < 0,
              "activations reserved twice without a release");
  KVSIM_CHECK(bytes >= 0, "negative activation bytes {}", bytes);
  if (bytes == 0) return AllocResult::success();
  if (CachingAllocator* a = store_->caching_allocator()) {
    AllocResult r = a->malloc(bytes, &activation_block_);
    if (!r) {
      activation_block_ = -1;
      fill_views(r);
      return r;
    }
    activation_bytes_ = a->block_size(activation_block_);
    return r;
  }
  // Without a store allocator, activations reuse what is cached from earlier iterations and
  // take the rest from the driver's free memory.
  const int64_t extra = bytes - activation_cached_bytes_;
  if (extra > 0) {
    const int64_t free = snapshot().free_bytes;
    if (extra > free) {
      AllocResult r =
          AllocResult::failure(OomReason::kCapacity, bytes, activation_cached_bytes_ + free,
                               activation_cached_bytes_ + free);
      fill_views(r);
      return r;
    }
    activation_cached_bytes_ = bytes;
  }
  activation_bytes_ = bytes;
  return AllocResult::success();
}

AllocResult GpuMemoryPool::reserve_activations(std::span<const BatchChunk> chunks) {
  return reserve_activations(activation_peak_bytes(model_, chunks, options_.attention));
}

AllocResult GpuMemoryPool::reserve_activations(std::span<const BatchChunk> chunks,
                                               int64_t decode_seqs, int64_t decode_context_tokens) {
  if (chunks.empty()) {
    return reserve_activations(decode_activation_bytes(decode_seqs, decode_context_tokens));
  }
  return reserve_activations(activation_peak_bytes(model_, chunks, decode_seqs,
                                                   decode_context_tokens, options_.attention));
}

void GpuMemoryPool::release_activations() {
  if (activation_block_ >= 0) {
    store_->caching_allocator()->free(activation_block_);
    activation_block_ = -1;
  }
  activation_bytes_ = 0;
}

int64_t GpuMemoryPool::decode_activation_bytes(int64_t decode_seqs,
                                               int64_t decode_context_tokens) const {
  // Only native attention's scores grow with the context (activation_peak_bytes).
  constexpr int64_t kMemoSeqs = 4096;
  if (options_.attention == AttentionKind::kNative || decode_seqs < 0 || decode_seqs >= kMemoSeqs) {
    return activation_peak_bytes(model_, {}, decode_seqs, decode_context_tokens,
                                 options_.attention);
  }
  const auto n = static_cast<size_t>(decode_seqs);
  if (decode_activation_memo_.size() <= n) decode_activation_memo_.resize(n + 1, -1);
  int64_t& bytes = decode_activation_memo_[n];
  if (bytes < 0) {
    bytes =
        activation_peak_bytes(model_, {}, decode_seqs, decode_context_tokens, options_.attention);
  }
  return bytes;
}

MemorySnapshot GpuMemoryPool::snapshot_with(const KvUsage& u, int64_t activation_bytes) const {
  KVSIM_CHECK(
      activation_bytes == activation_bytes_ ||
          (store_->caching_allocator() == nullptr && activation_bytes <= activation_cached_bytes_),
      "a snapshot with {} activation bytes ({} cached)", activation_bytes,
      activation_cached_bytes_);
  MemorySnapshot s;
  s.capacity_bytes = budget_.capacity_bytes;
  s.context_bytes = budget_.context_bytes;
  s.weights_bytes = budget_.weights_bytes;
  s.workspace_bytes = budget_.workspace_bytes;
  s.activation_bytes = activation_bytes;
  s.kv_live_bytes = u.live_bytes;
  s.kv_waste_bytes = u.held_bytes - u.live_bytes;
  s.kv_internal_bytes = scalar_load(u.internal_bytes);
  s.kv_reservation_bytes = scalar_load(u.reservation_bytes);
  s.kv_external_bytes = scalar_load(u.external_bytes);
  int64_t torch_reserved = 0;
  if (const CachingAllocator* a = store_->caching_allocator()) {
    const CachingAllocatorStats& st = a->stats();
    s.allocator_cache_bytes = st.reserved_bytes - st.allocated_bytes;
    s.torch_allocated_bytes = budget_.weights_bytes + st.allocated_bytes;
    torch_reserved = budget_.weights_bytes + st.reserved_bytes;
  } else {
    // The preallocated KV space is one torch tensor; activations stay cached at their high-water.
    s.kv_free_bytes = u.free_bytes;
    s.allocator_cache_bytes = activation_cached_bytes_ - activation_bytes;
    s.torch_allocated_bytes = budget_.weights_bytes + u.capacity_bytes + activation_bytes;
    torch_reserved = budget_.weights_bytes + u.capacity_bytes + activation_cached_bytes_;
  }
  s.torch_reserved_bytes = torch_reserved;
  s.free_bytes = s.capacity_bytes - s.context_bytes - s.workspace_bytes - torch_reserved;
  s.driver_free_bytes = s.capacity_bytes - s.context_bytes - torch_reserved - s.workspace_bytes;
  return s;
}

void GpuMemoryPool::check_invariants() const {
  store_->check_invariants();
  const MemorySnapshot s = snapshot();
  s.check();
  if (const CachingAllocator* a = store_->caching_allocator()) {
    KVSIM_CHECK(
        a->stats().allocated_bytes == s.kv_live_bytes + s.kv_waste_bytes + activation_bytes_,
        "allocator allocated {} != KV held {} + activations {}", a->stats().allocated_bytes,
        s.kv_live_bytes + s.kv_waste_bytes, activation_bytes_);
  }
}

}  // namespace kvsim

namespace kvsim {

void GpuMemoryPool::restart() {
  KVSIM_CHECK(store_->usage().requests == 0, "restart with {} requests still holding KV",
              store_->usage().requests);
  release_activations();
  activation_cached_bytes_ = 0;
  if (CachingAllocator* a = store_->caching_allocator()) a->empty_cache();
}

}  // namespace kvsim
