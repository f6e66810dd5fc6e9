// What-if snapshots (GpuMemoryPool::snapshot_with, DeferredGrowth::usage_after): the
// fast-forward's quiet runs record states they never make (docs/architecture.md,
// "Fast-forward"), so such a snapshot must be, field by field, the snapshot after the growth and
// the activation reservation it describes.
#include <catch2/catch.hpp>

#include <span>

#include "core/config_node.h"
#include "models/catalog.h"
#include "models/memory/gpu_memory_pool.h"
#include "models/memory/kv_capabilities.h"

using namespace kvsim;

namespace {

// Every field of a predicted snapshot equals the one made: their difference is zero throughout.
void check_same(const MemorySnapshot& predicted, const MemorySnapshot& made) {
  const MemorySnapshot zero = snapshot_difference(predicted, made);
  for (const int64_t v : zero.categories()) CHECK(v == 0);
  CHECK(zero.kv_internal_bytes == 0);
  CHECK(zero.kv_reservation_bytes == 0);
  CHECK(zero.kv_external_bytes == 0);
  CHECK(zero.torch_allocated_bytes == 0);
  CHECK(zero.torch_reserved_bytes == 0);
  CHECK(zero.driver_free_bytes == 0);
}

}  // namespace

// snapshot_with(usage_after(tokens, crossings), activations) against add_crossings(crossings),
// add(tokens - crossings) and that reservation.
TEST_CASE("a what-if snapshot is the snapshot after the growth and reservation it describes",
          "[memory][paged][fast_forward]") {
  const Catalog& c = Catalog::builtin();
  const ModelSpec& m = c.model("llama-3-8b");
  PoolOptions o{.profile_batched_tokens = 8192, .profile_num_seqs = 256};
  o.attention = AttentionKind::kNative;  // activations that grow with the context
  GpuMemoryPool pool(m, c.gpu("a100-sxm4-80gb"),
                     ConfigNode::parse_string("{type: paged, block_size: 16}", "test.yaml"), o);
  DeferredGrowth& growth = *pool.kv().deferred_growth();
  REQUIRE(growth.crossings_in_aggregate());
  // Two requests of 20 tokens (2 blocks each, 12 slots of reservation in their last) with room
  // to 200; a first reservation leaves activations cached at their high-water mark.
  REQUIRE(pool.allocate_kv(1, 20, 200));
  REQUIRE(pool.allocate_kv(2, 20, 200));
  const int64_t high = pool.decode_activation_bytes(2, 4000);
  REQUIRE(pool.reserve_activations(high));
  pool.release_activations();
  REQUIRE(pool.activation_cached_bytes() == high);
  growth.open_long(1);
  growth.open_long(2);
  // 30 tokens of which 2 start new blocks, and a decode step's activations for context 80.
  const int64_t act = pool.decode_activation_bytes(2, 80);
  REQUIRE(act < high);
  const MemorySnapshot predicted = pool.snapshot_with(*growth.usage_after(30, 2), act);
  growth.add_crossings(2);
  growth.add(28);
  REQUIRE(pool.reserve_activations(std::span<const BatchChunk>{}, 2, 80));
  const MemorySnapshot made = pool.snapshot();
  check_same(predicted, made);
  // By hand: live 40 + 30 = 70 tokens of 131,072 B; 4 + 2 = 6 blocks of 16 tokens held.
  CHECK(made.kv_live_bytes == 70 * 131'072);
  CHECK(made.kv_live_bytes + made.kv_waste_bytes == 6 * 16 * 131'072);
  CHECK(made.activation_bytes == act);
  pool.release_activations();
}

// The same with swaps (a sliding window's steady crossings: a block taken, the oldest freed):
// snapshot_with(usage_after(tokens, crossings, swaps)) against add_swaps and add.
TEST_CASE("a what-if snapshot with swaps is the snapshot after them",
          "[memory][paged][fast_forward][window]") {
  const Catalog& c = Catalog::builtin();
  const ModelSpec& m = c.model("mistral-7b");  // window 4,096
  GpuMemoryPool pool(m, c.gpu("a100-sxm4-80gb"),
                     ConfigNode::parse_string("{type: paged, block_size: 16}", "test.yaml"),
                     PoolOptions{.profile_batched_tokens = 8192, .profile_num_seqs = 256});
  DeferredGrowth& growth = *pool.kv().deferred_growth();
  // A request of 5,000 tokens, grown once past the window (5,001: blocks before position
  // 5,000 - 4,095 = 905 are freed, 905 / 16 = 56 of them), with room to 6,000: its long window
  // swaps (the crossing to 5,009 frees floor((5,009 - 4,096) / 16) - 56 = 1).
  REQUIRE(pool.allocate_kv(1, 5000, 6000));
  REQUIRE(pool.kv().grow(1, 5001));
  REQUIRE(growth.open_long(1) == 999);
  REQUIRE(growth.long_window_swaps(1));
  // 40 tokens: 32 within blocks, 8 the first tokens of new blocks, 3 of which swap (in a batch
  // of several requests' windows; one request here stands for the totals).
  const MemorySnapshot predicted = pool.snapshot_with(*growth.usage_after(40, 5, 3), 0);
  growth.add_crossings(5);
  growth.add_swaps(3);
  growth.add(32);
  const MemorySnapshot made = pool.snapshot();
  check_same(predicted, made);
  // By hand: live 5,001 - 56 x 16 = 4,105 tokens, + 40, - 3 x 16 for the freed blocks = 4,097;
  // blocks held: 313 - 56 = 257, + 5 taken (+ 3 taken and 3 freed) = 262.
  CHECK(made.kv_live_bytes == 4097 * 131'072);
  CHECK(made.kv_live_bytes + made.kv_waste_bytes == 262 * 16 * 131'072);
}
