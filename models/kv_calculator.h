// The KV-cache calculator behind `kvsim kv`: exact bytes of KV per request and per batch, the
// memory left beside the weights, and a risk level. Reproduces the seeds' arithmetic exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "models/model_spec.h"

namespace kvsim {

// Risk of a batch, from what is left of the capacity after weights and KV (see README):
//   critical   remaining < 0 (does not fit: the server OOMs)
//   warning    0 <= remaining < 40% of capacity
//   controlled 40% <= remaining < 60% of capacity
//   safe       remaining >= 60% of capacity
//   unknown    no capacity given
enum class Risk { kUnknown, kSafe, kControlled, kWarning, kCritical };

inline constexpr double kRiskSafeFraction = 0.60;
inline constexpr double kRiskControlledFraction = 0.40;

std::string_view risk_name(Risk r);  // "safe", "controlled", "warning", "critical", "unknown"
Risk classify_risk(std::optional<int64_t> remaining_bytes, std::optional<int64_t> capacity_bytes);

struct KvRow {
  int64_t seq_len = 0;
  int64_t batch = 0;
  int64_t kv_bytes_per_request = 0;
  int64_t kv_bytes_total = 0;
  std::optional<int64_t> remaining_bytes;  // capacity - weights - kv_bytes_total
  Risk risk = Risk::kUnknown;
};

struct KvQuery {
  ModelSpec model;  // with any --kv-heads/--kv-dtype overrides already applied
  std::vector<int64_t> seq_lens;
  int64_t batch = 1;
  std::optional<int64_t> capacity_bytes;
  int64_t weights_bytes = 0;
  // The paged block: a hybrid local/global model's request holds what vLLM's KV cache groups
  // hold (models/memory/kv_groups.h), whole blocks of its windows and chunks, not every token.
  int64_t block_tokens = 16;
};

// One row per sequence length: a request's KV is every token's (kv_bytes_per_token x seq_len),
// or for a hybrid model the blocks its groups hold (kv_group_blocks_held x block bytes, summed).
// Throws InputError when a figure would overflow 64 bits.
std::vector<KvRow> kv_table(const KvQuery& q);

}  // namespace kvsim
