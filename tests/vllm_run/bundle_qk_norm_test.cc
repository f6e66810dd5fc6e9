// Which shape a bundle's dense.csv row is costed at (validate/vllm_run/llmservingsim_bundle.h):
// the Q/K norm rows at the whole model's heads in every tpN/ folder (LLMServingSim's tp2/ rows
// of that op are its tp1/ rows unchanged), rotary on the same Q and K at this GPU's share.
#include <catch2/catch.hpp>

#include "models/catalog.h"
#include "validate/vllm_run/llmservingsim_bundle.h"

using namespace kvsim;
using namespace kvsim::validate;

TEST_CASE("dense_case: qk_norm at the whole model's heads, rotary at this GPU's share",
          "[vllm_run][import]") {
  // Qwen3-30B-A3B: 32 heads, 4 KV heads of 128. At TP 2 this GPU holds 16 + 2 heads.
  const ModelSpec& m = Catalog::builtin().model("qwen3-30b-a3b");
  const BundleDims tp1 = bundle_dims(m, 1), tp2 = bundle_dims(m, 2);
  CHECK(tp2.qk_norm_width == (32 + 4) * 128);
  // 10 tokens, read and write of Q and K in BF16, as a copy of half the traffic rounded to KiB:
  // qk_norm 2 x 10 x 4,608 x 2 = 184,320 B -> 92,160; rotary at TP 2, 2 x 10 x 2,304 x 2 =
  // 92,160 B -> 46,080.
  CHECK(dense_case("qk_norm", 10, tp2)->bytes == 92160);
  CHECK(dense_case("qk_norm", 10, tp1)->bytes == 92160);
  CHECK(dense_case("rotary_emb", 10, tp2)->bytes == 46080);
  CHECK(dense_case("rotary_emb", 10, tp1)->bytes == 92160);
}
