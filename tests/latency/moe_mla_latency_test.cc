// The operation counts of MoE layers (routed experts with the expected distinct experts, shared
// experts, dense-first layers, expert parallelism's all-to-all) and of MLA attention (prefill
// with the latent expanded, decode absorbed), each derived by hand (docs/latency.md "Mixture of
// experts", "MLA").
#include <catch2/catch.hpp>

#include <cmath>

#include "tests/latency/latency_test_util.h"

using namespace kvsim;
using kvsim::test::decode_batch;
using kvsim::test::find_op;
using kvsim::test::has_op;
using kvsim::test::make_model;
using kvsim::test::prefill_batch;

namespace {
// The catalog model with FP8 per-tensor scales (weight_group 0), whose reads are left out, so
// an FP8 weight reads exactly 1 byte (the 128 x 128 blocks add 4 / 16384 of a byte each).
LatencyModel moe_latency_model(const char* model, Parallelism par, const char* gpu = "h200") {
  const GpuSpec& g = Catalog::builtin().gpu(gpu);
  ModelSpec m = Catalog::builtin().model(model);
  m.weight_group = 0;
  return LatencyModel(m, g, default_profile(g), AttentionKind::kFlash, par);
}
}  // namespace

TEST_CASE("Qwen3-30B-A3B reads the weights of the experts a batch is expected to touch",
          "[latency][moe]") {
  // h 2048, expert width 768, 128 experts, top-8, 48 layers, BF16.
  const double L = 48, h = 2048, f = 768;
  // One decode token: 8 experts, each its gate/up (h x 2f) read once; 8 rows in, 8 rows out.
  const auto one = make_model("qwen3-30b-a3b", AttentionKind::kFlash, 0, 1, "h100-sxm")
                       .iteration(decode_batch({100}));
  CHECK(find_op(one, "mlp_gate_up").bytes ==
        Approx(L * (8 * h * 2 * f * 2 + 8 * h * 2 + 8 * 2 * f * 2)));
  CHECK(find_op(one, "mlp_gate_up").flops == Approx(L * 2 * 8 * h * 2 * f));
  CHECK(find_op(one, "router").flops == Approx(L * 2 * h * 128));
  // 16 tokens: 128 x (1 - (120/128)^16) = 82.42 distinct experts expected, 128 rows.
  const double touched = 128 * (1 - std::pow(120.0 / 128, 16));
  CHECK(touched == Approx(82.42).epsilon(1e-3));
  const auto sixteen = make_model("qwen3-30b-a3b", AttentionKind::kFlash, 0, 1, "h100-sxm")
                           .iteration(prefill_batch(16));
  CHECK(find_op(sixteen, "mlp_down").bytes ==
        Approx(L * (touched * f * h * 2 + 128 * f * 2 + 128 * h * 2)));
  CHECK_FALSE(has_op(sixteen, "shared_experts"));
  CHECK_FALSE(has_op(sixteen, "dense_mlp"));
}

TEST_CASE("DeepSeek-V3: dense-first layers, a shared expert and 58 routed layers",
          "[latency][moe][mla]") {
  // TP 8 on H200, FP8 weights (1 byte). Per GPU: dense MLP width 18432 / 8 = 2304, shared
  // expert 2048 / 8 = 256, routed experts 2048 / 8 = 256 each (all 256 of them).
  const auto lm = moe_latency_model("deepseek-v3", Parallelism{8, 1});
  const auto c = lm.iteration(decode_batch({1000}));
  const double h = 7168;
  // Router: 58 MoE layers x 2 x 7168 x 256 FLOPs for the one row.
  CHECK(find_op(c, "router").flops == Approx(58 * 2 * h * 256));
  // The 3 dense layers: gate/up 2 x 7168 x 4608 and down 2 x 2304 x 7168 FLOPs a row.
  CHECK(find_op(c, "dense_mlp").flops == Approx(3 * (2 * h * 4608 + 2 * 2304 * h)));
  // The shared expert: every row, 58 layers.
  CHECK(find_op(c, "shared_experts").flops == Approx(58 * (2 * h * 512 + 2 * 256 * h)));
  // Routed: one token's 8 experts, weights 8 x 7168 x 512 bytes (gate/up) per layer.
  CHECK(find_op(c, "mlp_gate_up").bytes == Approx(58 * (8 * h * 512 + 8 * h * 2 + 8 * 512 * 2)));
  CHECK_FALSE(has_op(c, "all_to_all"));  // no expert parallelism
  CHECK(has_op(c, "allreduce"));
}

TEST_CASE("MLA decode reads the latent once for all heads and absorbs the up-projections",
          "[latency][mla]") {
  // DeepSeek-V3 at TP 8: 16 heads per GPU, latent 512 + 64 rotary (BF16 KV), kv_b 512 x 16 x
  // (128 + 128) FP8 weights. One sequence of context 1000, per layer:
  //   KV 1000 x 576 x 2 = 1,152,000 bytes; queries in and outputs out in latent space
  //   16 x (576 + 512) x 2 = 34,816; kv_b read once 2,097,152: 3,283,968 bytes;
  //   FLOPs 2 x 16 x (576 + 512) x 1000 = 34,816,000 (QK over 576, PV over 512) plus the
  //   absorptions 2 x 16 x 512 x 256 = 4,194,304.
  const auto lm = moe_latency_model("deepseek-v3", Parallelism{8, 1});
  const auto c = lm.iteration(decode_batch({1000}));
  const OpCost& a = find_op(c, "attention_decode");
  CHECK(a.bytes == Approx(61 * 3'283'968.0));
  CHECK(a.flops == Approx(61 * (34'816'000.0 + 4'194'304.0)));
  // The KV write: 576 elements a token and layer, read 16-bit and written at 2 bytes.
  CHECK(find_op(c, "kv_cache_write").bytes == Approx(61 * 576 * 4.0));
  // o_proj: 16 heads x v 128 -> 7168.
  CHECK(find_op(c, "o_proj").flops == Approx(61 * 2 * 2048 * 7168.0));
}

TEST_CASE("MLA prefill expands the latent of every key and attends with 192/128 heads",
          "[latency][mla]") {
  // A 1000-token prompt at TP 8, per layer: causal pairs 1000 x 1001 / 2 = 500,500, each
  // 2 x (192 + 128) FLOPs a head over 16 heads; kv_b expands 1000 latents to 16 x (128 + 128):
  // 2 x 1000 x 512 x 4096 FLOPs. Bytes: Q and O 1000 x 16 x 320 x 2 = 10,240,000; the latents
  // 1000 x 576 x 2 = 1,152,000; kv_b 512 x 4096 x 1 = 2,097,152; the expanded K and V written
  // and read 2 x 1000 x 4096 x 2 = 16,384,000.
  const auto lm = moe_latency_model("deepseek-v3", Parallelism{8, 1});
  const auto c =
      lm.iteration(prefill_batch(1000));  // kept alive: find_op returns a reference into it
  const OpCost& a = find_op(c, "attention_prefill");
  CHECK(a.flops == Approx(61 * (640.0 * 16 * 500'500 + 2.0 * 1000 * 512 * 4096)));
  CHECK(a.bytes == Approx(61 * (10'240'000.0 + 1'152'000 + 2'097'152 + 16'384'000)));
}

TEST_CASE("DP 8 with expert parallelism: 32 experts a GPU, 8 replicas' tokens, all-to-all",
          "[latency][moe][parallel]") {
  // Each replica decodes 4 sequences; the 8 replicas' 32 tokens meet in each MoE layer. This
  // GPU holds 32 of 256 experts: it takes 32 x 8 x 32/256 = 32 rows and is expected to touch
  // 32 x (1 - (248/256)^32) = 32 x (1 - 0.36204) = 20.41 of its experts, each whole (width 2048,
  // FP8).
  const auto lm = moe_latency_model("deepseek-v3", Parallelism{1, 1, 8, true});
  const auto c = lm.iteration(decode_batch({500, 500, 500, 500}));
  const double h = 7168, f = 2048;
  const double touched = 32 * (1 - std::pow(248.0 / 256, 32));
  CHECK(touched == Approx(20.41).epsilon(1e-3));
  CHECK(find_op(c, "mlp_gate_up").flops == Approx(58 * 2 * 32 * h * 2 * f));
  CHECK(find_op(c, "mlp_gate_up").bytes ==
        Approx(58 * (touched * h * 2 * f + 32 * h * 2 + 32 * 2 * f * 2)));
  // All-to-all (vLLM's allgather_reducescatter): the 8 replicas' 4 tokens' hidden states with
  // their top-8 FP32 weights and INT32 ids, 7168 x 2 + 8 x 8 bytes each, gathered (460,800 B),
  // 7/8 of them from other GPUs, and their 7168 x 2-byte outputs reduce-scattered back
  // (458,752 B): (460,800 + 458,752) x 7/8 = 804,608 bytes per MoE layer.
  CHECK(find_op(c, "all_to_all").bytes == Approx(58 * 804'608.0));
  CHECK_FALSE(has_op(c, "allreduce"));  // attention runs whole on each GPU (t = 1)
}

TEST_CASE("MoE and MLA iterations: the memoised totals equal the full costing's bits",
          "[latency][moe][mla]") {
  for (const Parallelism par : {Parallelism{8, 1}, Parallelism{1, 1, 8, true}, Parallelism{2, 2}}) {
    const auto lm = moe_latency_model("deepseek-v3", par);
    for (const BatchShape& b :
         {prefill_batch(300), decode_batch({10, 2000, 70}), prefill_batch(17, 900, 3)}) {
      const IterationCost full = lm.iteration(b);
      const IterationCost totals = lm.iteration(b, OpDetail::kTotals);
      CHECK(full.seconds == totals.seconds);
      CHECK(full.flops == totals.flops);
      CHECK(full.bytes == totals.bytes);
    }
    BatchShape agg;
    agg.decode_seqs = 5;
    agg.decode_context_tokens = 5000;
    BatchShape listed = decode_batch({1000, 1000, 1000, 1000, 1000});
    CHECK(lm.iteration(agg, OpDetail::kTotals).seconds == lm.iteration(listed).seconds);
  }
}
