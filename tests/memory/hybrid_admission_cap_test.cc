// The per-group admission cap of vLLM's full-sequence gate (kv_groups.h, kv_group_admission_cap;
// vllm/v1/kv_cache_interface.py, max_admission_blocks_per_request) and the stores' gate
// (PagedBlocks::admission_blocks). Every figure is derived by hand in the comments.
#include <catch2/catch.hpp>

#include "models/catalog.h"
#include "models/memory/kv_groups.h"
#include "models/memory/paged_store.h"

using namespace kvsim;

TEST_CASE("Admission cap per group: a window less one and a step plus a block, a chunk and a step",
          "[memory][hybrid]") {
  const KvGroup full{KvGroup::Kind::kFull, 0, {}};
  const KvGroup window{KvGroup::Kind::kSlidingWindow, 1'024, {}};
  const KvGroup chunk{KvGroup::Kind::kChunked, 8'192, {}};
  // Full attention holds every block: no cap, the table.
  CHECK_FALSE(kv_group_admission_cap(full, 131'072, 16, 512).has_value());
  CHECK(kv_group_admission_blocks(full, 5'000, 16, 512) == 313);  // ceil(5,000 / 16)
  // Window 1,024, steps of 512: ceil(1,535 / 16) + 1 = 96 + 1 = 97.
  CHECK(kv_group_admission_cap(window, 131'072, 16, 512) == 97);
  CHECK(kv_group_admission_blocks(window, 5'000, 16, 512) == 97);
  // A max_model_len below the window and a step: ceil(1,000 / 16) + 1 = 63 + 1 = 64 (the start-up
  // sizer's figure); the gate of a 1,000-token sequence asks its table, 63.
  CHECK(kv_group_admission_cap(window, 1'000, 16, 512) == 64);
  CHECK(kv_group_admission_blocks(window, 1'000, 16, 512) == 63);
  // Chunk 8,192, steps of 512: ceil(8,704 / 16) = 544; a 20,000-token sequence is capped there,
  // a 4,000-token one asks its 250.
  CHECK(kv_group_admission_cap(chunk, 131'072, 16, 512) == 544);
  CHECK(kv_group_admission_blocks(chunk, 20'000, 16, 512) == 544);
  CHECK(kv_group_admission_blocks(chunk, 4'000, 16, 512) == 250);
}

TEST_CASE("The stores' admission gate: capped per group, the allocation itself not",
          "[memory][hybrid]") {
  // Gemma-3-27B: 1 full group and 6 sliding (window 1,024). A 5,000-token sequence, steps of 512:
  // 313 + 6 x 97 = 895, against 7 x 313 = 2,191 uncapped (what allocate would take for it whole).
  PagedStore gemma(kv_group_layout(Catalog::builtin().model("gemma-3-27b")), 16, 1'000);
  CHECK(gemma.admission_blocks({}, 5'000, 512) == 895);
  CHECK(gemma.blocks_to_allocate({}, 5'000) == 2'191);
  // Llama-4-Scout: 1 full and 3 chunked (8,192). 20,000 tokens: 1,250 + 3 x 544 = 2,882.
  PagedStore scout(kv_group_layout(Catalog::builtin().model("llama-4-scout")), 16, 3'000);
  CHECK(scout.admission_blocks({}, 20'000, 512) == 2'882);
  // A dense model whose every layer slides (window 4,096), steps of 2,048: ceil(6,143 / 16) + 1 =
  // 384 + 1 = 385; a 10,000-token sequence (625 blocks) is capped at 385, a 3,000-token one asks
  // its ceil(3,000 / 16) = 188.
  PagedStoreOptions o;
  o.block_tokens = 16;
  o.num_blocks = 1'000;
  o.sliding_window = 4'096;
  PagedStore dense(64, o);
  CHECK(dense.admission_blocks({}, 10'000, 2'048) == 385);
  CHECK(dense.admission_blocks({}, 3'000, 2'048) == 188);
  // Without a window the gate is the allocation: 625.
  o.sliding_window = 0;
  CHECK(PagedStore(64, o).admission_blocks({}, 10'000, 2'048) == 625);
}
