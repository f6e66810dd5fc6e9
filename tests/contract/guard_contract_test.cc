// The guard contract, run over every entry of the guard registry: a guard registered in
// register_guards() gets this suite without anyone editing it.
// How it fails: a guard whose example (its documented defaults) does not build, that refuses a
// tiny request on an empty replica, that breaks after on_restart()/on_release(), or whose
// declared KV needs are not met by any registered store, fails the CHECK that says which.
#include <catch2/catch.hpp>

#include "core/config_node.h"
#include "models/catalog.h"
#include "models/memory/gpu_memory_pool.h"
#include "models/memory/kv_store_registry.h"
#include "sim/guards/guard_registry.h"

using namespace kvsim;

namespace {

// The first registered store that provides everything `needs` asks for.
const KvStoreRegistry::Entry* store_for(KvCapabilities needs) {
  for (const auto& e : kv_store_registry().entries()) {
    if (e.make.provides.covers(needs)) return &e;
  }
  return nullptr;
}

// A real-sized replica's pool (an 80 GB A100 serving Llama-3-8B), so that every guard's
// documented defaults (kv_guard: an 8 GiB margin) leave room for a tiny request.
std::unique_ptr<GpuMemoryPool> replica_pool(const std::string& kv_type) {
  return std::make_unique<GpuMemoryPool>(
      Catalog::builtin().model("llama-3-8b"), Catalog::builtin().gpu("a100-sxm4-80gb"),
      ConfigNode::parse_string("{type: " + kv_type + "}", "test.yaml"), PoolOptions{});
}

RequestState tiny_request(int64_t id) {
  RequestState r;
  r.spec.id = id;
  r.spec.prompt_tokens = 16;
  r.spec.output_tokens = 4;
  r.prompt_tokens = 16;
  return r;
}

}  // namespace

TEST_CASE("every registered guard builds from its defaults and admits a tiny request",
          "[contract][guards]") {
  const auto& entries = guard_registry().entries();
  REQUIRE(entries.size() >= 5);
  for (const auto& entry : entries) {
    INFO("guard " << entry.name << ", example " << entry.make.example);
    const auto* store = store_for(entry.make.needs);
    REQUIRE(store != nullptr);
    auto pool = replica_pool(store->name);
    const ModelSpec model = Catalog::builtin().model("llama-3-8b");

    const ConfigNode list = ConfigNode::parse_string("[" + entry.make.example + "]", "example");
    auto guards = make_guards(list, model, store->name);
    REQUIRE(guards.size() == 1);
    list.reject_unknown_keys();  // the example uses only keys the guard reads
    Guard& g = *guards[0];
    CHECK(g.type() == entry.name);

    const MemorySnapshot memory = pool->snapshot();
    const GuardContext ctx{.now = 0,
                           .memory = memory,
                           .kv = pool->kv(),
                           .inflight = 0,
                           .kv_budget_bytes = pool->kv().usage().capacity_bytes > 0
                                                  ? pool->kv().usage().capacity_bytes
                                                  : pool->budget().device_bytes_for_torch()};
    const RequestState r = tiny_request(1);
    CHECK(g.check(r, ctx).action == Decision::Action::kAdmit);
    g.on_release(r);
    g.on_restart();
    CHECK(g.check(tiny_request(2), ctx).action == Decision::Action::kAdmit);
    g.on_restart();
  }
}

TEST_CASE("every guard's KV needs are checked against every registered store",
          "[contract][guards]") {
  const ModelSpec model = Catalog::builtin().model("llama-3-8b");
  for (const auto& guard : guard_registry().entries()) {
    for (const auto& store : kv_store_registry().entries()) {
      INFO("guard " << guard.name << " on store " << store.name);
      const ConfigNode list = ConfigNode::parse_string("[" + guard.make.example + "]", "example");
      if (store.make.provides.covers(guard.make.needs)) {
        CHECK(make_guards(list, model, store.name).size() == 1);
      } else {
        CHECK_THROWS_WITH(
            make_guards(list, model, store.name),
            Catch::Matchers::Contains("this policy's engine.kv.type is " + store.name));
      }
    }
  }
}
