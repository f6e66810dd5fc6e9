// The memory of one GPU replica: context, weights, workspace, the current iteration's
// activations and a KV store, accounted so that the categories always sum to capacity. The engine
// goes through this class for every allocation, so every failure carries all three views
// (torch allocated, torch reserved, driver free).
//
// Torch views: weights are torch-allocated. A preallocated KV store (paged, contiguous) is one
// torch tensor (allocated = reserved = its capacity). Activations go through the store's caching
// allocator when it has one; otherwise they are torch-allocated while held and stay cached
// (reserved) up to their high-water mark, as PyTorch's allocator keeps them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "models/gpu_spec.h"
#include "models/memory/activation.h"
#include "models/memory/caching_allocator.h"
#include "models/memory/kv_store.h"
#include "models/memory/memory_snapshot.h"
#include "models/model_spec.h"
#include "models/parallelism.h"

namespace kvsim {

class ConfigNode;

// Non-torch runtime workspace by default (cuBLAS workspaces, NCCL buffers, CUDA graphs): vLLM
// measures a few hundred MiB of "non-torch" memory on one GPU (facts.md §1.1).
inline constexpr int64_t kDefaultWorkspaceBytes = 512 * (int64_t{1} << 20);

struct PoolOptions {
  int64_t workspace_bytes = kDefaultWorkspaceBytes;
  AttentionKind attention = AttentionKind::kFlash;
  // The profile run that sizes a vLLM-style store (activation peak subtracted before KV).
  int64_t profile_batched_tokens = 2048;
  int64_t profile_num_seqs = 256;
  // The pool is one GPU's: with tensor/pipeline parallelism it holds that GPU's shard of the
  // weights and KV (gpu_share), and the stage with room for the fewest KV tokens sizes it, as
  // vLLM takes the smallest block count over its workers.
  Parallelism parallelism;
};

class GpuMemoryPool {
 public:
  // Builds the store from a `kv:` node with make_kv_store(). Throws ConfigError.
  GpuMemoryPool(const ModelSpec& model, const GpuSpec& gpu, const ConfigNode& kv_node,
                PoolOptions options = {});
  // Takes an already-built store (tests, benchmarks).
  GpuMemoryPool(const ModelSpec& model, const GpuSpec& gpu, std::unique_ptr<KvStore> store,
                PoolOptions options = {});

  // The budget this pool gives a store (capacity, context, weights, workspace, profile peak),
  // per GPU: of the stage sizing_share() picks.
  static KvBudget budget_for(const ModelSpec& model, const GpuSpec& gpu,
                             const PoolOptions& options);
  // The whole model as the GPU that sizes the pool holds it (the model itself on one GPU).
  // Throws InputError when the model cannot be split as options.parallelism says.
  static ModelSpec sizing_share(const ModelSpec& model, const GpuSpec& gpu,
                                const PoolOptions& options);

  KvStore& kv() { return *store_; }
  const KvStore& kv() const { return *store_; }
  // The model as this GPU holds it (gpu_share: heads, KV heads, layers and weights per GPU).
  const ModelSpec& model() const { return model_; }
  const Parallelism& parallelism() const { return options_.parallelism; }
  const GpuSpec& gpu() const { return gpu_; }
  const KvBudget& budget() const { return budget_; }
  AttentionKind attention() const { return options_.attention; }

  // The store's operations, with the failure views filled in for the whole GPU.
  AllocResult allocate_kv(RequestId request, int64_t prompt_tokens, int64_t max_total_tokens,
                          const PrefixHashes& prefix = {});
  AllocResult grow_kv(RequestId request, int64_t new_total_tokens);
  // grow_kv() unless the request already holds `tokens` (KvStore::grow_to_at_least).
  AllocResult ensure_kv(RequestId request, int64_t tokens);
  void release_kv(RequestId request);

  // Holds `bytes` of activations for the current iteration. Requires: none held.
  AllocResult reserve_activations(int64_t bytes);
  // Same, with the bytes from activation_peak_bytes(model, chunks, attention()).
  AllocResult reserve_activations(std::span<const BatchChunk> chunks);
  // Same, for `chunks` plus `decode_seqs` decode steps whose contexts sum to
  // `decode_context_tokens` (activation_peak_bytes' aggregate form).
  AllocResult reserve_activations(std::span<const BatchChunk> chunks, int64_t decode_seqs,
                                  int64_t decode_context_tokens);
  // Releases the iteration's activations (no-op when none are held).
  void release_activations();
  int64_t activation_bytes() const { return activation_bytes_; }

  // The process restarted after a crash: memory returns to its post-load state (no activations,
  // an empty allocator cache). Requires: no request holds KV.
  void restart();

  // Every category, the waste split and the three views. O(1) for paged, O(holes) otherwise.
  MemorySnapshot snapshot() const { return snapshot_with(store_->usage(), activation_bytes_); }
  // The snapshot with the store's usage `u` and `activation_bytes` of activations (within what
  // is cached: nothing else changes), for states the fast-forward records without making them
  // (KvStore's usage_after). Requires: no store allocator (the activations are not a block).
  MemorySnapshot snapshot_with(const KvUsage& u, int64_t activation_bytes) const;
  // A decode-only batch's activation bytes (what reserve_activations would reserve), and the
  // high-water mark of activations a reservation takes without new memory.
  int64_t decode_activation_bytes(int64_t decode_seqs, int64_t decode_context_tokens) const;
  int64_t activation_cached_bytes() const { return activation_cached_bytes_; }
  // The category holding byte `offset` of the GPU's memory right now.
  MemCategory category_at(int64_t offset) const { return snapshot().category_at(offset); }

  // KVSIM_CHECK: the store's invariants, the snapshot's (sum to capacity, reserved >= allocated,
  // driver free <= physical free).
  void check_invariants() const;

 private:
  void fill_views(AllocResult& r) const;

  ModelSpec model_;
  GpuSpec gpu_;
  PoolOptions options_;
  KvBudget budget_;
  std::unique_ptr<KvStore> store_;
  int64_t activation_bytes_ = 0;
  int64_t activation_cached_bytes_ = 0;  // high-water mark (no store allocator)
  CaBlockId activation_block_ = -1;      // with a store allocator
  // decode_activation_bytes by decode count when they do not depend on the context (every
  // attention but native); -1: not yet computed. A busy replica asks at every decode step.
  mutable std::vector<int64_t> decode_activation_memo_;
};

}  // namespace kvsim
