// Stores of every type, small enough for property tests, built through the YAML factory.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "models/catalog.h"
#include "models/memory/gpu_memory_pool.h"
#include "models/memory/kv_store.h"

namespace kvsim::test {

// Every store configuration the contract and property tests run over.
inline std::vector<std::string> store_yamls() {
  return {
      "{type: paged, block_size: 16}",
      "{type: paged, block_size: 1}",
      "{type: paged, block_size: 16, enable_prefix_caching: true}",
      "{type: contiguous, reserve: max_len, max_len: 4096}",
      "{type: contiguous, reserve: prompt_plus_max_new, fit: best}",
      "{type: contiguous, reserve: pow2}",
      "{type: contiguous, reserve: exact, fit: best}",
      "{type: contiguous, reserve: prompt_plus_pow2_new, fit: buddy}",
      "{type: contiguous, reserve: exact, fit: buddy}",
      "{type: caching_allocator, growth: preallocate}",
      "{type: caching_allocator, growth: concat}",
      "{type: caching_allocator, growth: chunked, chunk_tokens: 64}",
      "{type: caching_allocator, growth: chunked, chunk_tokens: 16, max_split_size_mb: 64}",
  };
}

// A small GPU (so that failures happen) holding a small model, with its pool built from `yaml`.
inline std::unique_ptr<GpuMemoryPool> small_pool(const std::string& yaml) {
  ModelSpec m = Catalog::builtin().model("llama-3-8b");
  m.weights_bytes_override = int64_t{1} << 30;  // 1 GiB of weights
  GpuSpec g = Catalog::builtin().gpu("a100-sxm4-80gb");
  g.memory_bytes = int64_t{4} << 30;  // 4 GiB GPU
  g.context_reserve_bytes = int64_t{256} << 20;
  PoolOptions o;
  o.workspace_bytes = int64_t{64} << 20;
  o.profile_batched_tokens = 512;
  o.profile_num_seqs = 8;
  return std::make_unique<GpuMemoryPool>(m, g, ConfigNode::parse_string(yaml, "test.yaml"), o);
}

}  // namespace kvsim::test
