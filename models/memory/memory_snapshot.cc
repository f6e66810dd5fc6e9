#include "models/memory/memory_snapshot.h"

#include "core/check.h"

namespace kvsim {

std::string_view mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::kContext: return "context";
    case MemCategory::kWeights: return "weights";
    case MemCategory::kWorkspace: return "workspace";
    case MemCategory::kActivations: return "activations";
    case MemCategory::kKvLive: return "kv_live";
    case MemCategory::kKvWaste: return "kv_waste";
    case MemCategory::kKvFree: return "kv_free";
    case MemCategory::kAllocatorCache: return "allocator_cache";
    case MemCategory::kFree: return "free";
  }
  return "free";
}

int64_t MemorySnapshot::category_bytes(MemCategory c) const {
  return categories()[static_cast<size_t>(c)];
}

int64_t MemorySnapshot::category_sum() const {
  int64_t sum = 0;
  for (int64_t v : categories()) sum += v;
  return sum;
}

int64_t MemorySnapshot::kv_footprint_bytes() const {
  return kv_live_bytes + kv_internal_bytes + kv_reservation_bytes + kv_external_bytes;
}

MemCategory MemorySnapshot::category_at(int64_t offset) const {
  KVSIM_CHECK(offset >= 0 && offset < capacity_bytes, "byte {} outside capacity {}", offset,
              capacity_bytes);
  const auto cats = categories();
  int64_t end = 0;
  for (int i = 0; i < kMemCategoryCount; ++i) {
    end += cats[static_cast<size_t>(i)];
    if (offset < end) return static_cast<MemCategory>(i);
  }
  return MemCategory::kFree;
}

void MemorySnapshot::check() const {
  const auto cats = categories();
  for (int i = 0; i < kMemCategoryCount; ++i) {
    KVSIM_CHECK(cats[static_cast<size_t>(i)] >= 0, "category {} is negative: {}",
                mem_category_name(static_cast<MemCategory>(i)), cats[static_cast<size_t>(i)]);
  }
  KVSIM_CHECK(category_sum() == capacity_bytes, "categories sum to {} but capacity is {}",
              category_sum(), capacity_bytes);
  KVSIM_CHECK(kv_internal_bytes + kv_reservation_bytes == kv_waste_bytes,
              "kv waste {} != internal {} + reservation {}", kv_waste_bytes, kv_internal_bytes,
              kv_reservation_bytes);
  KVSIM_CHECK(kv_external_bytes >= 0 && kv_external_bytes <= kv_free_bytes + allocator_cache_bytes,
              "external fragmentation {} exceeds the free KV space {} + cache {}",
              kv_external_bytes, kv_free_bytes, allocator_cache_bytes);
  KVSIM_CHECK(torch_reserved_bytes >= torch_allocated_bytes, "reserved {} < allocated {}",
              torch_reserved_bytes, torch_allocated_bytes);
  KVSIM_CHECK(driver_free_bytes <= free_bytes, "driver free {} exceeds physical free {}",
              driver_free_bytes, free_bytes);
}

MemorySnapshot snapshot_plus(const MemorySnapshot& a, int64_t k, const MemorySnapshot& b) {
  MemorySnapshot d;
  d.capacity_bytes = a.capacity_bytes + k * b.capacity_bytes;
  d.context_bytes = a.context_bytes + k * b.context_bytes;
  d.weights_bytes = a.weights_bytes + k * b.weights_bytes;
  d.workspace_bytes = a.workspace_bytes + k * b.workspace_bytes;
  d.activation_bytes = a.activation_bytes + k * b.activation_bytes;
  d.kv_live_bytes = a.kv_live_bytes + k * b.kv_live_bytes;
  d.kv_waste_bytes = a.kv_waste_bytes + k * b.kv_waste_bytes;
  d.kv_free_bytes = a.kv_free_bytes + k * b.kv_free_bytes;
  d.allocator_cache_bytes = a.allocator_cache_bytes + k * b.allocator_cache_bytes;
  d.free_bytes = a.free_bytes + k * b.free_bytes;
  d.kv_internal_bytes = a.kv_internal_bytes + k * b.kv_internal_bytes;
  d.kv_reservation_bytes = a.kv_reservation_bytes + k * b.kv_reservation_bytes;
  d.kv_external_bytes = a.kv_external_bytes + k * b.kv_external_bytes;
  d.torch_allocated_bytes = a.torch_allocated_bytes + k * b.torch_allocated_bytes;
  d.torch_reserved_bytes = a.torch_reserved_bytes + k * b.torch_reserved_bytes;
  d.driver_free_bytes = a.driver_free_bytes + k * b.driver_free_bytes;
  return d;
}

MemorySnapshot snapshot_difference(const MemorySnapshot& a, const MemorySnapshot& b) {
  return snapshot_plus(a, -1, b);
}

}  // namespace kvsim
