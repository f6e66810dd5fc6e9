// The KV store registry: `kv: {type: ...}` names one of its entries. Each entry carries the
// capabilities its store provides (kv_capabilities.h), so other components can check a pairing
// from the configuration alone. Adding a store takes one add() in register_kv_stores()
// (kv_store_factory.cc); make_kv_store(), `kvsim list kv`, the did-you-mean hints, docs/memory.md's
// table test and the contract suite (tests/contract/kv_store_contract_test.cc) all read it.
#pragma once

#include <functional>
#include <memory>

#include "core/registry.h"
#include "models/memory/kv_capabilities.h"
#include "models/memory/kv_store.h"

namespace kvsim {

struct KvStoreFactory {
  KvCapabilities provides;
  // Builds the store from its `kv:` node, sized from `budget`. Throws ConfigError.
  std::function<std::unique_ptr<KvStore>(const ConfigNode&, const ModelSpec&, const KvBudget&)>
      build;
};

using KvStoreRegistry = Registry<KvStoreFactory>;

// Adds every KV store: paged, contiguous, caching_allocator.
void register_kv_stores(KvStoreRegistry& registry);
// The registry filled by register_kv_stores(), built on first use.
const KvStoreRegistry& kv_store_registry();

}  // namespace kvsim
