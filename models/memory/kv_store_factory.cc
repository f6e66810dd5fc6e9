// make_kv_store(): a `kv:` YAML node -> a KvStore, sized from the budget, through the KV store
// registry (kv_store_registry.h).
#include <fmt/format.h>

#include <cmath>

#include "core/config_node.h"
#include "core/errors.h"
#include "core/units.h"
#include "models/gpu_spec.h"
#include "models/memory/caching_allocator_store.h"
#include "models/memory/contiguous_store.h"
#include "models/memory/kv_groups.h"
#include "models/memory/kv_store.h"
#include "models/memory/kv_store_registry.h"
#include "models/memory/paged_store.h"
#include "models/model_spec.h"

namespace kvsim {

// vLLM: KV bytes = total x gpu_memory_utilization - everything that is not KV.
int64_t kv_bytes_from_utilization(const ConfigNode& node, const KvBudget& budget,
                                  const char* what) {
  const double util =
      node.get<double>("gpu_memory_utilization", 0.9, {.min = 0, .max = 1, .min_exclusive = true});
  const auto usable =
      static_cast<int64_t>(std::floor(static_cast<double>(budget.capacity_bytes) * util));
  const int64_t kv = usable - budget.non_kv_bytes();
  if (kv <= 0) {
    node.fail(fmt::format(
        "no room for the {}: {:.2f} GiB x gpu_memory_utilization {} leaves {:.2f} GiB, but "
        "context, weights, workspace and the activation peak take {:.2f} GiB",
        what, to_gib(budget.capacity_bytes), util, to_gib(usable), to_gib(budget.non_kv_bytes())));
  }
  return kv;
}

namespace {

std::unique_ptr<KvStore> make_paged(const ConfigNode& node, const ModelSpec& model,
                                    const KvBudget& budget) {
  PagedStoreOptions o;
  o.block_tokens = node.get<int64_t>("block_size", 16, {.min = 1, .max = 1 << 20});
  o.enable_prefix_caching = node.get<bool>("enable_prefix_caching", false);
  // The model's sliding window frees the blocks that leave it (paged_store.h).
  o.sliding_window = model.sliding_window.value_or(0);
  // Local and global layers: vLLM's hybrid manager, a block table per layer group over one pool
  // of group_size-layer blocks (hybrid_coordinator.h).
  // vLLM's --disable-hybrid-kv-cache-manager: every layer in one full-attention group (the
  // windows still save compute, not memory: unify_hybrid_kv_cache_specs).
  const bool hybrid = model.hybrid() && !node.get<bool>("disable_hybrid_kv_cache_manager", false);
  const KvGroupLayout layout = hybrid ? kv_group_layout(model) : KvGroupLayout{};
  const int64_t block_bytes =
      hybrid ? layout.block_bytes(o.block_tokens) : o.block_tokens * model.kv_bytes_per_token();
  if (node.has("num_blocks") && node.has("gpu_memory_utilization")) {
    node.child("num_blocks").fail("give num_blocks or gpu_memory_utilization, not both");
  }
  if (auto blocks = node.get_optional<int64_t>("num_blocks", {.min = 1, .max = (1LL << 31) - 1})) {
    o.num_blocks = *blocks;
    const auto bytes = checked_mul(o.num_blocks, block_bytes);
    const int64_t room = budget.capacity_bytes - budget.non_kv_bytes();
    if (!bytes || *bytes > room) {
      node.child("num_blocks")
          .fail(fmt::format(
              "{} blocks of {} bytes do not fit in the {:.2f} GiB left after context, weights, "
              "workspace and activations",
              o.num_blocks, block_bytes, to_gib(room)));
    }
  } else {
    // vLLM sizes num_gpu_blocks from the budget and keeps block 0 as its null block (BlockPool:
    // never allocated), so a request can use one block fewer. `num_blocks` (above) is the
    // usable pool; the null block's bytes stay free memory here.
    o.num_blocks = kv_bytes_from_utilization(node, budget, "paged KV pool") / block_bytes - 1;
    if (o.num_blocks < 1)
      node.fail("the KV budget is smaller than two blocks (one is vLLM's null block)");
    o.num_blocks = std::min<int64_t>(o.num_blocks, (1LL << 31) - 1);
  }
  if (hybrid) {
    return std::make_unique<PagedStore>(layout, o.block_tokens, o.num_blocks,
                                        o.enable_prefix_caching);
  }
  return std::make_unique<PagedStore>(model.kv_bytes_per_token(), o);
}

std::unique_ptr<KvStore> make_contiguous(const ConfigNode& node, const ModelSpec& model,
                                         const KvBudget& budget) {
  ContiguousStoreOptions o;
  o.reserve =
      node.get_enum<ReservePolicy>("reserve",
                                   {{"max_len", ReservePolicy::kMaxLen},
                                    {"prompt_plus_max_new", ReservePolicy::kPromptPlusMaxNew},
                                    {"pow2", ReservePolicy::kPow2},
                                    {"prompt_plus_pow2_new", ReservePolicy::kPromptPlusPow2New},
                                    {"exact", ReservePolicy::kExact}},
                                   ReservePolicy::kMaxLen);
  o.fit = node.get_enum<FitPolicy>(
      "fit",
      {{"first", FitPolicy::kFirst}, {"best", FitPolicy::kBest}, {"buddy", FitPolicy::kBuddy}},
      FitPolicy::kFirst);
  const int64_t default_len = model.max_position > 0 ? model.max_position : 2048;
  o.max_len = node.get<int64_t>("max_len", default_len, {.min = 1, .max = 1LL << 40});
  if (node.has("num_tokens") && node.has("gpu_memory_utilization")) {
    node.child("num_tokens").fail("give num_tokens or gpu_memory_utilization, not both");
  }
  if (auto tokens = node.get_optional<int64_t>("num_tokens", {.min = 1, .max = 1LL << 40})) {
    // The arena in tokens, as paged's num_blocks (the vLLM paper's Table 1 gives OPT-13B's
    // 12 GB of KV on an A100-40GB as 15.7K token slots).
    const auto bytes = checked_mul(*tokens, model.kv_bytes_per_token());
    const int64_t room = budget.capacity_bytes - budget.non_kv_bytes();
    if (!bytes || *bytes > room) {
      node.child("num_tokens")
          .fail(fmt::format(
              "{} tokens of {} bytes do not fit in the {:.2f} GiB left after context, weights, "
              "workspace and activations",
              *tokens, model.kv_bytes_per_token(), to_gib(room)));
    }
    o.arena_bytes = *bytes;
  } else {
    o.arena_bytes = kv_bytes_from_utilization(node, budget, "contiguous KV arena");
  }
  return std::make_unique<ContiguousStore>(model.kv_bytes_per_token(), o);
}

std::unique_ptr<KvStore> make_caching(const ConfigNode& node, const ModelSpec& model,
                                      const KvBudget& budget) {
  CachingStoreOptions o;
  o.growth = node.get_enum<GrowthPolicy>("growth",
                                         {{"preallocate", GrowthPolicy::kPreallocate},
                                          {"concat", GrowthPolicy::kConcat},
                                          {"chunked", GrowthPolicy::kChunked}},
                                         GrowthPolicy::kConcat);
  o.chunk_tokens = node.get<int64_t>("chunk_tokens", 256, {.min = 1, .max = 1 << 24});
  // PyTorch refuses max_split_size_mb <= 20 (kLargeBuffer).
  if (auto mb = node.get_optional<double>("max_split_size_mb",
                                          {.min = 20, .max = 1e9, .min_exclusive = true})) {
    o.max_split_size_bytes = static_cast<int64_t>(std::llround(*mb * static_cast<double>(kMiB)));
  }
  o.device_limit_bytes = budget.device_bytes_for_torch();
  if (o.device_limit_bytes <= 0) {
    node.fail(fmt::format(
        "no device memory left for torch after context, weights and workspace "
        "({:.2f} GiB of {:.2f} GiB)",
        to_gib(budget.capacity_bytes - o.device_limit_bytes), to_gib(budget.capacity_bytes)));
  }
  return std::make_unique<CachingAllocatorStore>(model, o);
}

}  // namespace

void register_kv_stores(KvStoreRegistry& r) {
  r.add({"paged",
         "vLLM's block pool: fixed-size blocks, allocated on demand",
         {"block_size", "num_blocks", "gpu_memory_utilization", "enable_prefix_caching",
          "disable_hybrid_kv_cache_manager"},
         {KvCapability::kPaged | KvCapability::kDeferredGrowth | KvCapability::kPreallocatedPool,
          make_paged}});
  r.add({"contiguous",
         "one contiguous region per request in a preallocated arena (Orca-style)",
         {"reserve", "fit", "max_len", "num_tokens", "gpu_memory_utilization"},
         {KvCapability::kPreallocatedPool, make_contiguous}});
  r.add({"caching_allocator",
         "KV tensors through PyTorch's caching allocator (HF-style)",
         {"growth", "chunk_tokens", "max_split_size_mb"},
         {KvCapability::kCachingAllocator, make_caching}});
}

const KvStoreRegistry& kv_store_registry() {
  static const KvStoreRegistry registry = KvStoreRegistry::filled("KV store", register_kv_stores);
  return registry;
}

std::unique_ptr<KvStore> make_kv_store(const ConfigNode& kv_node, const ModelSpec& model,
                                       const GpuSpec& gpu, const KvBudget& budget) {
  (void)gpu;  // the budget already carries the GPU's capacity and context reserve
  if (!kv_node.is_map()) kv_node.fail_expected("a map with a 'type' key");
  const auto& entry = kv_store_registry().choose(kv_node);
  kv_node.allow(entry.keys);  // a typo's did-you-mean sees every key of the type
  std::unique_ptr<KvStore> store = entry.make.build(kv_node, model, budget);
  kv_node.reject_unknown_keys();
  return store;
}

}  // namespace kvsim
