// vLLM's hybrid KV cache manager (kv_groups.h, hybrid_coordinator.h): the layer groups of hybrid
// models, KV bytes per token and per group, the pool's size, and per-group block tables with the
// blocks that leave a window or chunk freed. Every figure is derived by hand in the comments.
#include <catch2/catch.hpp>

#include "core/config_node.h"
#include "core/errors.h"
#include "models/catalog.h"
#include "models/memory/kv_groups.h"
#include "models/memory/kv_store.h"
#include "models/memory/paged_store.h"
#include "tests/memory/tiny_hybrid.h"

using namespace kvsim;
using kvsim::test::tiny_hybrid;

namespace {

const ModelSpec& hybrid(const char* name) { return Catalog::builtin().model(name); }

// The factory test's budget: 80 GiB x 0.9 - 20 GiB of non-KV = 55,834,574,848 bytes of KV.
KvBudget hybrid_budget() {
  KvBudget b;
  b.capacity_bytes = int64_t{80} << 30;
  b.context_bytes = int64_t{1} << 30;
  b.weights_bytes = int64_t{16} << 30;
  b.workspace_bytes = int64_t{1} << 30;
  b.activation_peak_bytes = int64_t{2} << 30;
  return b;
}

std::unique_ptr<KvStore> hybrid_store(const std::string& yaml, const ModelSpec& m) {
  return make_kv_store(ConfigNode::parse_string(yaml, "kv.yaml"), m,
                       Catalog::builtin().gpu("a100-sxm4-80gb"), hybrid_budget());
}

}  // namespace

TEST_CASE("vLLM's layer groups: gpt-oss 18 + 18, Gemma 3 10 + 6 x 10 padded, Llama 4 12 + 3 x 12",
          "[memory][hybrid]") {
  // gpt-oss-120b: 18 full and 18 sliding layers; 18 < 1.5 x 18, so groups of 18: two groups.
  // One layer's KV per token: 2 x 8 x 64 x 2 = 2,048 bytes; per group 18 x 2,048 = 36,864 (the
  // two together: the model's 73,728); a block 18 x 16 x 2,048 = 589,824 bytes.
  const KvGroupLayout oss = kv_group_layout(hybrid("gpt-oss-120b"));
  REQUIRE(oss.groups.size() == 2);
  CHECK(oss.group_size == 18);
  CHECK(oss.padding_layers() == 0);
  CHECK(oss.groups[0].kind == KvGroup::Kind::kFull);
  CHECK(oss.groups[1].kind == KvGroup::Kind::kSlidingWindow);
  CHECK(oss.groups[1].span == 128);
  CHECK(oss.group_bytes_per_token(0) == 36'864);
  CHECK(oss.group_bytes_per_token(1) == 36'864);
  CHECK(oss.block_bytes(16) == 589'824);
  // Gemma-3-27B: 10 full, 52 sliding; 52 >= 1.5 x 10, so groups of 10: 1 full and ceil(52 / 10)
  // = 6 sliding, dealt layers[i::6] (9, 9, 9, 9, 8, 8 layers): 8 padding layers. One layer's KV
  // per token 2 x 16 x 128 x 2 = 8,192; a block 10 x 16 x 8,192 = 1,310,720 bytes; the full
  // group 81,920 bytes a token, the sliding ones 73,728 or 65,536.
  const KvGroupLayout gemma = kv_group_layout(hybrid("gemma-3-27b"));
  REQUIRE(gemma.groups.size() == 7);
  CHECK(gemma.group_size == 10);
  CHECK(gemma.padding_layers() == 8);
  CHECK(gemma.groups[1].layers.size() == 9);
  CHECK(gemma.groups[6].layers.size() == 8);
  CHECK(gemma.groups[1].layers[0] == 0);
  CHECK(gemma.groups[1].layers[1] == 7);  // local layers 0,1,2,3,4,6,7,...: every sixth of them
  CHECK(gemma.group_bytes_per_token(0) == 81'920);
  CHECK(gemma.group_bytes_per_token(1) == 73'728);
  CHECK(gemma.group_bytes_per_token(6) == 65'536);
  CHECK(gemma.block_bytes(16) == 1'310'720);
  // Llama-4-Scout: 12 NoPE (full) and 36 chunked layers: groups of 12, 1 + 3; a block 12 x 16
  // x 4,096 = 786,432 bytes.
  const KvGroupLayout scout = kv_group_layout(hybrid("llama-4-scout"));
  REQUIRE(scout.groups.size() == 4);
  CHECK(scout.group_size == 12);
  CHECK(scout.groups[3].kind == KvGroup::Kind::kChunked);
  CHECK(scout.groups[3].span == 8192);
  CHECK(scout.block_bytes(16) == 786'432);
}

TEST_CASE("Blocks a request holds per group: a window and a block, a chunk, or everything",
          "[memory][hybrid]") {
  const KvGroup full{KvGroup::Kind::kFull, 0, {}};
  const KvGroup window{KvGroup::Kind::kSlidingWindow, 128, {}};
  const KvGroup chunk{KvGroup::Kind::kChunked, 8192, {}};
  // 32,768 tokens in blocks of 16: the full group's table, 2,048 blocks.
  CHECK(kv_group_blocks_held(full, 32'768, 16) == 2'048);
  // Window 128: tokens before 32,768 - 128 + 1 = 32,641 are skipped, 2,040 whole blocks: 8 held.
  CHECK(kv_group_blocks_held(window, 32'768, 16) == 8);
  // 32,770 tokens: 2,049 blocks, 32,643 / 16 = 2,040 skipped: 9 held (the window and a block).
  CHECK(kv_group_blocks_held(window, 32'770, 16) == 9);
  // Chunk 8192 at 10,000 tokens: the current chunk starts at 8,192 (512 blocks skipped); the
  // table is 625 blocks: 113 held. At exactly 8,192 the next query opens a new chunk: 0 held.
  CHECK(kv_group_blocks_held(chunk, 10'000, 16) == 113);
  CHECK(kv_group_blocks_held(chunk, 8'192, 16) == 0);
}

TEST_CASE("A hybrid model's pool: available / (page x group_size) blocks, less the null block",
          "[memory][hybrid][config]") {
  // 55,834,574,848 bytes: gpt-oss-120b's blocks of 589,824 bytes: 94,663, less vLLM's null block
  // = 94,662. Gemma-3-27B's of 1,310,720: 42,598 - 1 = 42,597. Llama-4-Scout's of 786,432:
  // 70,997 - 1 = 70,996.
  auto oss = hybrid_store("{type: paged}", hybrid("gpt-oss-120b"));
  REQUIRE(oss->paged() != nullptr);
  CHECK(oss->paged()->total_blocks() == 94'662);
  // Deferred growth with block crossings in aggregate (one block a group each); with prefix
  // caching, inside a request's last block, block crossings one call each.
  REQUIRE(oss->deferred_growth() != nullptr);
  CHECK(oss->deferred_growth()->crossings_in_aggregate());
  CHECK_FALSE(hybrid_store("{type: paged, enable_prefix_caching: true}", hybrid("gpt-oss-120b"))
                  ->deferred_growth()
                  ->crossings_in_aggregate());
  CHECK(oss->kv_bytes_per_token() == 73'728);
  CHECK(hybrid_store("{type: paged}", hybrid("gemma-3-27b"))->paged()->total_blocks() == 42'597);
  CHECK(hybrid_store("{type: paged}", hybrid("llama-4-scout"))->paged()->total_blocks() == 70'996);
  // Prefix caching is offered for hybrid models.
  CHECK(hybrid_store("{type: paged, enable_prefix_caching: true}", hybrid("gpt-oss-20b"))
            ->paged()
            ->prefix_caching());
}

TEST_CASE("Per-group block tables: a sliding group frees the blocks that leave its window",
          "[memory][hybrid]") {
  // Groups: full {1, 3} and sliding {0, 2} (window 32), 2 layers each: 32 bytes a token per
  // group, a block 2 x 16 x 16 = 512 bytes. 20 blocks.
  const ModelSpec m = tiny_hybrid(ModelSpec::LocalKind::kSlidingWindow, 32);
  PagedStore s(kv_group_layout(m), 16, 20);
  CHECK(s.block_bytes() == 512);
  // A 40-token prompt: 3 blocks in each table, nothing computed: 6 blocks.
  CHECK(s.blocks_to_allocate({}, 40) == 6);
  REQUIRE(s.allocate(1, 40, 100));
  CHECK(s.free_blocks() == 14);
  // To 41: the 40 computed tokens skip 40 - 32 + 1 = 9 tokens, no whole block; room in block 3.
  CHECK(s.blocks_to_grow(1, 41) == 0);
  REQUIRE(s.grow(1, 41));
  // To 49: 41 computed skip 10 tokens (no block); a fourth block in each table.
  CHECK(s.blocks_to_grow(1, 49) == 2);
  REQUIRE(s.grow(1, 49));
  CHECK(s.free_blocks() == 12);
  // To 50: 49 computed skip 18 tokens: the sliding table's first block is freed.
  REQUIRE(s.grow(1, 50));
  CHECK(s.groups()->held_blocks(1, 0) == 4);
  CHECK(s.groups()->held_blocks(1, 1) == 3);
  CHECK(s.free_blocks() == 13);
  CHECK(s.window_freed_blocks() == 1);
  // Usage: live = full 50 x 32 + sliding (50 - 16) x 32 = 1,600 + 1,088 = 2,688; reservation
  // = each group's last block to 64 tokens: 2 x 14 x 32 = 896; held 7 x 512 = 3,584; internal 0.
  const KvUsage u = s.usage();
  CHECK(u.live_bytes == 2'688);
  CHECK(u.reservation_bytes == 896);
  CHECK(u.held_bytes == 3'584);
  CHECK(u.internal_bytes == 0);
  CHECK(u.capacity_bytes == 20 * 512);
  s.check_invariants();
  // A second request of 200 tokens wants 2 x 13 = 26 blocks of the 13 free: refused, unchanged.
  const AllocResult no = s.allocate(2, 200, 200);
  CHECK_FALSE(no.ok);
  CHECK(no.wanted_bytes == 26 * 512);
  CHECK(s.free_blocks() == 13);
  s.release(1);
  CHECK(s.free_blocks() == 20);
  CHECK(s.usage().held_bytes == 0);
  s.check_invariants();
}

TEST_CASE("Per-group block tables: a chunked group frees its finished chunks", "[memory][hybrid]") {
  // Chunk 32 on layers 0 and 2. A 64-token prompt: 4 blocks a table. Growing to 65 with 64
  // computed: the current chunk starts at 64, so the chunked table frees its 4 blocks and
  // takes a fifth: full 5 held, chunked 1.
  const ModelSpec m = tiny_hybrid(ModelSpec::LocalKind::kChunked, 32);
  PagedStore s(kv_group_layout(m), 16, 20);
  REQUIRE(s.allocate(7, 64, 128));
  CHECK(s.free_blocks() == 12);
  CHECK(s.blocks_to_grow(7, 65) == 0);  // 2 new blocks, 4 freed first
  REQUIRE(s.grow(7, 65));
  CHECK(s.groups()->held_blocks(7, 0) == 5);
  CHECK(s.groups()->held_blocks(7, 1) == 1);
  CHECK(s.free_blocks() == 14);
  s.check_invariants();
}
