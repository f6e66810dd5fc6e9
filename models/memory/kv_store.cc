#include "models/memory/kv_store.h"

#include <fmt/format.h>

namespace kvsim {

namespace {
// 1234567 -> "1,234,567".
std::string commas(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}
}  // namespace

std::string_view oom_reason_name(OomReason r) {
  switch (r) {
    case OomReason::kNone: return "none";
    case OomReason::kCapacity: return "capacity";
    case OomReason::kFragmentation: return "fragmentation";
    case OomReason::kTooLong: return "too_long";
  }
  return "none";
}

AllocResult AllocResult::failure(OomReason reason, int64_t wanted, int64_t store_free,
                                 int64_t largest_free) {
  AllocResult r;
  r.ok = false;
  r.reason = reason;
  r.wanted_bytes = wanted;
  r.store_free_bytes = store_free;
  r.largest_free_bytes = largest_free;
  return r;
}

std::string AllocResult::message() const {
  if (ok) return "ok";
  return fmt::format(
      "out of memory ({}): wanted {} bytes; store free {} bytes (largest piece {}); torch "
      "allocated {}, reserved {}; driver free {}",
      oom_reason_name(reason), commas(wanted_bytes), commas(store_free_bytes),
      commas(largest_free_bytes), commas(torch_allocated_bytes), commas(torch_reserved_bytes),
      commas(driver_free_bytes));
}

double KvUsage::usage_efficiency() const {
  const int64_t f = footprint_bytes();
  return f == 0 ? 1.0 : static_cast<double>(live_bytes) / static_cast<double>(f);
}

}  // namespace kvsim
