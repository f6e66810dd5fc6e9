// The scenario's `engine:` section (everything but `kv:`, which the memory pool reads).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "models/dtype.h"
#include "models/memory/activation.h"
#include "core/sim_time.h"

namespace kvsim {

class ConfigNode;

struct EngineConfig {
  enum class Preemption { kRecompute, kSwap, kOff };
  enum class OnOom { kCrash, kAbortRequest };

  std::string scheduler = "continuous";  // a name in scheduler_registry()
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 16384;
  bool chunked_prefill = false;
  int64_t batch_size = 8;  // static scheduler: requests per fixed batch
  Preemption preemption = Preemption::kRecompute;  // paged stores only
  int64_t swap_space_bytes = 4 * (int64_t{1} << 30);
  OnOom on_oom = OnOom::kCrash;
  SimTime restart = 90 * kNsPerSecond;
  AttentionKind attention = AttentionKind::kFlash;
  int tensor_parallel = 1;
  // Parallelism and quantization (vLLM engine args --pipeline-parallel-size, --quantization,
  // --kv-cache-dtype); unset dtypes keep the catalog model's. See docs/memory.md.
  int pipeline_parallel = 1;
  std::optional<DType> weights_dtype;
  std::optional<DType> kv_cache_dtype;
  int64_t workspace_bytes = 512 * (int64_t{1} << 20);
  std::string profile_path;  // calibrated latency profile; empty = the GPU's defaults
};

// Reads `engine:` (may be absent: all defaults). `kv:` is left for the memory pool. Throws
// ConfigError.
EngineConfig parse_engine_config(const ConfigNode& engine);

}  // namespace kvsim
