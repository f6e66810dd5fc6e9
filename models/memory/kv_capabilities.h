// What a KV store can do beyond the KvStore basics, as static metadata on its registry entry
// (models/memory/kv_store_registry.h). Components that need a capability say so in their own
// registry entry (a guard's `needs`), and a scenario that pairs them with a store lacking it is a
// ConfigError before anything runs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvsim {

enum class KvCapability : uint32_t {
  kPaged = 1u << 0,             // fixed-size blocks: free_blocks(), total_blocks(), block_tokens()
  kDeferredGrowth = 1u << 1,    // decode growth inside the last block without a call per token
  kCachingAllocator = 1u << 2,  // allocates through a torch caching allocator (torch_allocator())
};

// A set of KvCapability.
class KvCapabilities {
 public:
  constexpr KvCapabilities() = default;
  constexpr KvCapabilities(KvCapability c) : bits_(static_cast<uint32_t>(c)) {}  // NOLINT: implicit
  constexpr KvCapabilities operator|(KvCapabilities o) const { return from_bits(bits_ | o.bits_); }
  constexpr bool has(KvCapability c) const { return (bits_ & static_cast<uint32_t>(c)) != 0; }
  // Whether every capability of `needed` is here.
  constexpr bool covers(KvCapabilities needed) const {
    return (bits_ & needed.bits_) == needed.bits_;
  }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr bool operator==(const KvCapabilities&) const = default;

 private:
  static constexpr KvCapabilities from_bits(uint32_t b) {
    KvCapabilities c;
    c.bits_ = b;
    return c;
  }
  uint32_t bits_ = 0;
};

constexpr KvCapabilities operator|(KvCapability a, KvCapability b) {
  return KvCapabilities(a) | KvCapabilities(b);
}

// Every capability, for loops and listings.
inline constexpr KvCapability kAllKvCapabilities[] = {
    KvCapability::kPaged, KvCapability::kDeferredGrowth, KvCapability::kCachingAllocator};

// "paged", "deferred growth", "caching allocator".
constexpr std::string_view kv_capability_name(KvCapability c) {
  switch (c) {
    case KvCapability::kPaged: return "paged";
    case KvCapability::kDeferredGrowth: return "deferred growth";
    case KvCapability::kCachingAllocator: return "caching allocator";
  }
  return "?";
}

// "paged, deferred growth", or "none".
inline std::string kv_capability_list(KvCapabilities caps) {
  std::string out;
  for (KvCapability c : kAllKvCapabilities) {
    if (!caps.has(c)) continue;
    if (!out.empty()) out += ", ";
    out += kv_capability_name(c);
  }
  return out.empty() ? "none" : out;
}

}  // namespace kvsim
