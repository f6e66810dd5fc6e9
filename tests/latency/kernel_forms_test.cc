// The forms `import llmservingsim` fits for what vLLM runs, each against numbers worked by hand:
// the fused residual-add + RMSNorm kernels' bytes, elementwise bytes served from L2 below and
// above its size, and FlashAttention-2's tiles and waves for a short chunk and a mixed batch, the
// elementwise kernels' latency terms (CTAs, serial loads).
#include <catch2/catch.hpp>

#include "models/latency/flash_tiles.h"
#include "tests/latency/latency_test_util.h"

using namespace kvsim;
using kvsim::test::find_op;
using kvsim::test::has_op;
using kvsim::test::prefill_batch;

namespace {

LatencyModel pro6000_model(const std::string& model, const Profile& p) {
  const GpuSpec& g = Catalog::builtin().gpu("rtx-pro-6000");
  return LatencyModel(Catalog::builtin().model(model), g, p, AttentionKind::kFlash);
}

}  // namespace

TEST_CASE("norm_act_residual moves two fused add+RMSNorm kernels a layer, as vLLM runs them",
          "[latency][kernel_forms]") {
  // Llama-3-8B: 32 layers, hidden 4,096, ffn 14,336, 32 heads and 8 KV heads of 128. A prefill
  // of S = 1,000 tokens, per layer: two fused_add_rms_norm kernels, each reading x and the
  // residual and writing both (4 x 1,000 x 4,096 x 2 B = 32,768,000 B); SiLU x up reads gate and
  // up and writes one (3 x 1,000 x 14,336 x 2 = 86,016,000 B); rotary reads and writes Q and K
  // (2 x 1,000 x (4,096 + 1,024) x 2 = 20,480,000 B). Sum: 172,032,000 B a layer,
  // 5,505,024,000 B for 32 layers (the separate norms and adds were 10 rows: 5,767,168,000).
  const GpuSpec& g = Catalog::builtin().gpu("rtx-pro-6000");
  const auto c = pro6000_model("llama-3-8b", default_profile(g)).iteration(prefill_batch(1000));
  CHECK(find_op(c, "norm_act_residual").bytes == Approx(5'505'024'000.0));
}

TEST_CASE("elementwise bytes that fit in L2 move at the L2 rate, the rest at the HBM rate",
          "[latency][kernel_forms]") {
  // The embedding op is one kernel of m x hidden x (2 + 2) bytes: 16,384 B a token for
  // Llama-3-8B. The RTX PRO 6000's L2 is 128 MiB = 134,217,728 B. With the speedup 4, the floor
  // 0 and launch 0, the kernel's time over the speedup-1 time (every byte at HBM) is:
  //   1,000 tokens, 16,384,000 B (below L2): all in L2, 1/4 = 0.25;
  //   10,000 tokens, 163,840,000 B (above): (134,217,728 / 4 + 29,622,272) / 163,840,000
  //   = 63,176,704 / 163,840,000 = 0.3856.
  const GpuSpec& g = Catalog::builtin().gpu("rtx-pro-6000");
  Profile flat = default_profile(g);
  flat.elementwise_floor_s = 0;
  flat.of(OpClass::kElementwise).launch_overhead_s = 0;
  Profile l2 = flat;
  l2.elementwise_l2_speedup = 4;
  auto embedding_s = [&](const Profile& p, int64_t tokens) {
    return find_op(pro6000_model("llama-3-8b", p).iteration(prefill_batch(tokens)), "embedding")
        .seconds;
  };
  CHECK(embedding_s(l2, 1000) / embedding_s(flat, 1000) == Approx(0.25));
  CHECK(embedding_s(l2, 10000) / embedding_s(flat, 10000) == Approx(63'176'704.0 / 163'840'000));
  // Speedup 1 is the HBM rate exactly: kvsim's default profiles cost as before.
  const double hbm_rate = g.hbm_bytes_per_s * flat.of(OpClass::kElementwise).memory_efficiency;
  CHECK(embedding_s(flat, 1000) == Approx(16'384'000.0 / hbm_rate));
}

TEST_CASE("flash tiles: a short chunk pays for whole 64-row tiles in one wave",
          "[latency][kernel_forms]") {
  // 16 new tokens after 1,000 cached, 32 heads of 128 (kBlockN 128), 188 SMs: one query block
  // per head (16 <= 64), 32 CTAs in one wave, each walking ceil(1,016 / 128) = 8 KV tiles.
  const FlashTileWork w = flash_tile_work({PrefillChunk{16, 1000, true}}, 0, 0, 32, 128, 188, 0);
  CHECK(w.ctas == 32);
  CHECK(w.waves == 1);
  CHECK(w.wave_blocks == 8);
  // 48 tokens after 1,000 walk the same tiles: the chunk's time does not grow inside a tile.
  const FlashTileWork w48 = flash_tile_work({PrefillChunk{48, 1000, true}}, 0, 0, 32, 128, 188, 0);
  CHECK(w48.wave_blocks == 9);  // ceil(1,048 / 128) = 9: the keys crossed a tile boundary
  CHECK(flash_block_n(64) == 256);
  CHECK(flash_block_n(128) == 128);
  CHECK(flash_block_n(256) == 64);
}

TEST_CASE("flash tiles: a mixed batch's decodes each take a query tile, placed longest first",
          "[latency][kernel_forms]") {
  // A 128-token chunk from empty (two query blocks: 64 keys -> 1 tile, 128 keys -> 1 tile) and
  // 10 decodes of 300 tokens (ceil(300 / 128) = 3 tiles each), 32 heads, 188 SMs. CTAs: 32 x 2
  // + 32 x 10 = 384. Longest first: the 320 decode CTAs fill waves 1 and 2 (188 + 132), whose
  // longest CTAs walk 3 tiles; the chunk's 64 CTAs fill wave 2's last 56 slots and start wave 3
  // (8 CTAs of 1 tile). Waves 3, tiles 3 + 3 + 1 = 7.
  const FlashTileWork w = flash_tile_work({PrefillChunk{128, 0, true}}, 10, 300, 32, 128, 188, 0);
  CHECK(w.ctas == 384);
  CHECK(w.waves == 3);
  CHECK(w.wave_blocks == 7);
}

TEST_CASE("flash tiles: the profile's tiled kernel costs a mixed batch as one varlen kernel",
          "[latency][kernel_forms]") {
  // One layer of 32 heads of 128 and 8 KV heads on the RTX PRO 6000 (503.8 TFLOP/s, 188 SMs,
  // 1,597 GB/s), flash compute efficiency 0.5, memory 1, launch 2 us, 3 us a wave. A tile is
  // 4 x 64 x 128 x 128 = 4,194,304 FLOPs; one SM's share runs 503.8e12 x 0.5 / 188
  // = 1.339894e12 FLOP/s: 3.130326 us a tile. The 16-token chunk after 1,000: one wave of 8
  // tiles = 3 + 25.042609 = 28.042609 us of compute against (2 x 16 x 32 x 128 x 2 + 2 x 1,016
  // x 8 x 128 x 2) = 4,423,680 B / 1,597 GB/s = 2.77 us of memory: 30.042609 us with the launch.
  const GpuSpec& g = Catalog::builtin().gpu("rtx-pro-6000");
  Profile p = default_profile(g);
  p.flash_tiles.fitted = true;
  p.flash_tiles.wave_overhead_s = 3e-6;
  ClassParams& f = p.of(OpClass::kAttentionFlash);
  f.compute_efficiency = 0.5;
  f.memory_efficiency = 1.0;
  f.launch_overhead_s = 2e-6;
  ModelSpec m = Catalog::builtin().model("llama-3-8b");
  m.layers = 1;
  const LatencyModel lm(m, g, p, AttentionKind::kFlash);
  CHECK(find_op(lm.iteration(prefill_batch(16, 1000)), "attention_prefill").seconds * 1e6 ==
        Approx(30.042609).epsilon(1e-6));
  // The same chunk beside 10 decodes of 1,000 tokens: 32 + 320 CTAs, longest first: 320 of
  // ceil(1,000 / 128) = 8 tiles fill wave 1 (188) and start wave 2; the chunk's 32 CTAs (8 tiles)
  // join it. 2 waves of 8 tiles: 2 x 3 + 16 x 3.130326 = 56.085218 us, + 2 us launch; memory
  // (4,423,680 + 2 x 10 x 32 x 128 x 2 + 2 x 10,000 x 8 x 128 x 2 = 45,547,520 B: 28.52 us) is
  // below it. No attention_decode operation (the decodes ran inside the kernel).
  BatchShape mixed = prefill_batch(16, 1000);
  mixed.decode.assign(10, DecodeSeq{1000});
  mixed.block_tokens = 16;
  const IterationCost c = lm.iteration(mixed);
  CHECK(find_op(c, "attention_prefill").seconds * 1e6 == Approx(58.085218).epsilon(1e-6));
  CHECK_FALSE(has_op(c, "attention_decode"));
  // The totals-only path (the engine's memo) charges the same.
  CHECK(lm.iteration(mixed, OpDetail::kTotals).seconds == Approx(c.seconds).epsilon(1e-12));
}

TEST_CASE("elementwise latency: Q/K norm CTAs over the SMs, the embedding's small-index loads",
          "[latency][kernel_forms]") {
  // Qwen3-30B-A3B (48 layers, 32 heads and 4 KV heads of 128, hidden 2,048) on the RTX PRO 6000
  // (188 SMs); floor 2 us, launch 0, 50 ns a CTA per SM, 0.25 us a serial load. A 100-token
  // prefill, per layer: q_norm launches 100 x 32 = 3,200 CTAs, k_norm 100 x 4 = 400, so the two
  // kernels take 2 + 3,200 / 188 x 0.05 and 2 + 400 / 188 x 0.05 us: 4 + 3,600 / 188 x 0.05
  // = 4.957447 us (their bytes, 1,638,400 and 204,800 B, take 1.14 and 0.14 us at 0.9 of
  // 1,597 GB/s); 48 layers: 237.957447 us. Without the CTA term: 48 x 4 = 192 us.
  const GpuSpec& g = Catalog::builtin().gpu("rtx-pro-6000");
  REQUIRE(g.sm_count == 188);
  Profile p = default_profile(g);
  p.elementwise_floor_s = 2e-6;
  p.of(OpClass::kElementwise).launch_overhead_s = 0;
  p.of(OpClass::kElementwise).memory_efficiency = 0.9;
  Profile bytes_only = p;
  p.elementwise_cta_s = 50e-9;
  p.elementwise_serial_load_s = 0.25e-6;
  auto op_s = [](const Profile& prof, int64_t tokens, const char* op) {
    return find_op(pro6000_model("qwen3-30b-a3b", prof).iteration(prefill_batch(tokens)), op)
        .seconds;
  };
  CHECK(op_s(p, 100, "qk_norm") == Approx(237.957447e-6));
  CHECK(op_s(bytes_only, 100, "qk_norm") == Approx(192e-6));
  // The embedding gathers 8 rows (65,536 B): PyTorch's small-index kernel loops each thread over
  // the 8 indices, 2 + 8 x 0.25 = 4 us; 16 rows 2 + 4 = 6 us; from 17 rows the large-index
  // kernel, the floor alone (139,264 B move in well under 2 us).
  CHECK(op_s(p, 8, "embedding") == Approx(4e-6));
  CHECK(op_s(p, 16, "embedding") == Approx(6e-6));
  CHECK(op_s(p, 17, "embedding") == Approx(2e-6));
  CHECK(op_s(bytes_only, 8, "embedding") == Approx(2e-6));
}

TEST_CASE("flash tiles: a varlen batch re-reads its decodes' KV per query head past L2",
          "[latency][kernel_forms]") {
  // One layer of Llama-3-8B (32 heads, 8 KV heads: 4 query heads a KV head, 128 x 2 B x 2 = 512 B
  // of K and V a token and KV head) on the RTX PRO 6000 (188 SMs, 128 MiB = 134,217,728 B L2).
  // A 64-token chunk from empty (1 query block) beside 128 decodes of 4,096 tokens: 129 CTAs a
  // head, so a decode's 4 query heads are 3 x 129 = 387 >= 188 CTAs apart; one head's KV of the
  // batch is (128 x 4,096 + 64) x 512 = 268,468,224 B > L2: re-reads 3 x (1 - 134,217,728 /
  // 268,468,224) = 1.500183, so the decodes' KV (128 x 4,096 x 8 x 512 = 2,147,483,648 B) moves
  // 2.500183 times: 5,369,102,288 B; with Q and O (2 x 192 x 32 x 128 x 2 = 3,145,728 B) and the
  // chunk's K and V (64 x 8 x 512 = 262,144 B): 5,372,510,160 B.
  const GpuSpec& g = Catalog::builtin().gpu("rtx-pro-6000");
  Profile p = default_profile(g);
  p.flash_tiles.fitted = true;
  ModelSpec m = Catalog::builtin().model("llama-3-8b");
  m.layers = 1;
  const LatencyModel lm(m, g, p, AttentionKind::kFlash);
  auto mixed_bytes = [&](int64_t n, int64_t context) {
    BatchShape b = prefill_batch(64);
    b.decode.assign(static_cast<size_t>(n), DecodeSeq{context});
    b.block_tokens = 16;
    return find_op(lm.iteration(b), "attention_prefill").bytes;
  };
  CHECK(mixed_bytes(128, 4096) == Approx(5'372'510'160.0).epsilon(1e-9));
  // 32 decodes of 16,384: one head's KV is 268,468,224 B too, but 3 x 33 = 99 < 188 CTAs: the
  // 4 heads stream it together, read once: 32 x 16,384 x 8 x 512 + 2 x 96 x 32 x 128 x 2
  // + 262,144 = 2,147,483,648 + 1,572,864 + 262,144 = 2,149,318,656 B.
  CHECK(mixed_bytes(32, 16384) == Approx(2'149'318'656.0).epsilon(1e-12));
  // 128 decodes of 1,024: one head's KV (67,141,632 B) fits in L2, read once.
  CHECK(mixed_bytes(128, 1024) ==
        Approx(128.0 * 1024 * 8 * 512 + 3'145'728 + 262'144).epsilon(1e-12));
}
