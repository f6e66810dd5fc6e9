#include "models/kv_calculator.h"

#include <fmt/format.h>

#include "core/errors.h"
#include "core/units.h"
#include "models/memory/kv_groups.h"

namespace kvsim {

namespace {

// A request's KV bytes at `seq` tokens (nothing when it overflows).
std::optional<int64_t> request_bytes(const KvQuery& q, int64_t seq) {
  if (!q.model.hybrid()) return checked_mul(q.model.kv_bytes_per_token(), seq);
  const KvGroupLayout l = kv_group_layout(q.model);
  int64_t blocks = 0;
  for (const KvGroup& g : l.groups) blocks += kv_group_blocks_held(g, seq, q.block_tokens);
  return checked_mul(blocks, l.block_bytes(q.block_tokens));
}

}  // namespace

std::string_view risk_name(Risk r) {
  switch (r) {
    case Risk::kSafe: return "safe";
    case Risk::kControlled: return "controlled";
    case Risk::kWarning: return "warning";
    case Risk::kCritical: return "critical";
    case Risk::kUnknown: return "unknown";
  }
  return "unknown";
}

Risk classify_risk(std::optional<int64_t> remaining, std::optional<int64_t> capacity) {
  if (!remaining || !capacity || *capacity <= 0) return Risk::kUnknown;
  if (*remaining < 0) return Risk::kCritical;
  const double frac = static_cast<double>(*remaining) / static_cast<double>(*capacity);
  if (frac < kRiskControlledFraction) return Risk::kWarning;
  if (frac < kRiskSafeFraction) return Risk::kControlled;
  return Risk::kSafe;
}

std::vector<KvRow> kv_table(const KvQuery& q) {
  auto overflow = [&](int64_t seq) {
    return InputError(fmt::format(
        "KV bytes for seq_len {} x batch {} overflow 64-bit arithmetic; use smaller values", seq,
        q.batch));
  };
  std::vector<KvRow> rows;
  for (int64_t seq : q.seq_lens) {
    KvRow r;
    r.seq_len = seq;
    r.batch = q.batch;
    auto per_req = request_bytes(q, seq);
    if (!per_req) throw overflow(seq);
    auto total = checked_mul(*per_req, q.batch);
    if (!total) throw overflow(seq);
    r.kv_bytes_per_request = *per_req;
    r.kv_bytes_total = *total;
    if (q.capacity_bytes) {
      // capacity - weights - total, checked: a total near 2^63 minus large weights would wrap.
      auto remaining = checked_add(*q.capacity_bytes, -q.weights_bytes);
      if (remaining) remaining = checked_add(*remaining, -*total);
      if (!remaining) throw overflow(seq);
      r.remaining_bytes = *remaining;
    }
    r.risk = classify_risk(r.remaining_bytes, q.capacity_bytes);
    rows.push_back(r);
  }
  return rows;
}

}  // namespace kvsim
