// The terms a measured vLLM server needs beyond the kernels' rooflines: Qwen3's per-head Q/K
// norm, the per-sequence step overhead (the sampler), and the slowdown of decode attention in a
// batch that also holds a prefill chunk. Each is checked by hand and against the memoised
// totals the engine uses (which must have the full costing's bits).
#include <catch2/catch.hpp>

#include "models/latency/sampler_cost.h"
#include "tests/latency/latency_test_util.h"

using namespace kvsim;
using kvsim::test::find_op;
using kvsim::test::has_op;

namespace {
ModelSpec qwen3_like() {
  ModelSpec m = Catalog::builtin().model("llama-3-8b");
  m.qk_norm = true;
  return m;
}
}  // namespace

TEST_CASE("qk_norm: two RMSNorm kernels over Q and K after qkv_proj, for Qwen3 only",
          "[latency][qwen3]") {
  const GpuSpec& g = Catalog::builtin().gpu("a100-sxm4-80gb");
  const LatencyModel with(qwen3_like(), g, default_profile(g), AttentionKind::kFlash);
  const LatencyModel without(Catalog::builtin().model("llama-3-8b"), g, default_profile(g),
                             AttentionKind::kFlash);
  BatchShape b;
  b.prefill.push_back(PrefillChunk{100, 0, true});
  const IterationCost c = with.iteration(b);
  // Q: 32 heads x 128 = 4,096 values a token, K: 8 x 128 = 1,024; each read and written in 2
  // bytes: (2 x 100 x 4,096 + 2 x 100 x 1,024) x 2 = 2,048,000 bytes a layer, 32 layers.
  const OpCost& q = find_op(c, "qk_norm");
  CHECK(q.bytes == 32.0 * 2048000);
  CHECK(q.op_class == OpClass::kElementwise);
  CHECK_FALSE(has_op(without.iteration(b), "qk_norm"));
  CHECK(c.seconds == Approx(without.iteration(b).seconds + q.seconds));
  // The engine's memoised totals keep the full costing's bits with the extra operation.
  CHECK(with.iteration(b, OpDetail::kTotals).seconds == c.seconds);
  BatchShape d;
  d.decode_seqs = 8;
  d.decode_context_tokens = 8000;
  d.block_tokens = 16;
  CHECK(with.iteration(d, OpDetail::kTotals).seconds == with.iteration(d).seconds);
}

TEST_CASE("per_sequence_us: the step overhead grows with the sequences that sample a token",
          "[latency][overhead]") {
  const GpuSpec& g = Catalog::builtin().gpu("rtx-pro-6000");
  Profile p = default_profile(g);
  p.iteration_overhead_s = 100e-6;
  p.per_sequence_overhead_s = 0.5e-6;
  const LatencyModel lm(Catalog::builtin().model("llama-3.1-8b"), g, p, AttentionKind::kFlash);
  // 10 decodes and a chunk that ends its prompt: 11 sequences sample, 100 + 11 x 0.5 = 105.5 us.
  BatchShape b;
  b.prefill.push_back(PrefillChunk{64, 0, true});
  b.decode.assign(10, DecodeSeq{500});
  b.block_tokens = 16;
  CHECK(lm.iteration(b).overhead_seconds == Approx(105.5e-6));
  CHECK(lm.iteration(b, OpDetail::kTotals).seconds == lm.iteration(b).seconds);
  // A chunk that does not end its prompt samples nothing: 100 + 10 x 0.5 = 105 us.
  b.prefill[0].emits_token = false;
  CHECK(lm.iteration(b).overhead_seconds == Approx(105e-6));
  // Decode-only steps (the decode-step memo, fast-forward's path): 100 + 32 x 0.5 = 116 us.
  BatchShape d;
  d.decode_seqs = 32;
  d.decode_context_tokens = 32 * 700;
  d.block_tokens = 16;
  const IterationCost full = lm.iteration(d);
  CHECK(full.overhead_seconds == Approx(116e-6));
  CHECK(lm.iteration(d, OpDetail::kTotals).seconds == full.seconds);
  CHECK(lm.decode_step_seconds(32, 32 * 700, 16) == full.seconds);
}

TEST_CASE("per_sequence_past_l2_us: the sampler's slope rises once its logits outgrow L2",
          "[latency][overhead]") {
  // rtx-pro-6000: 128 MiB of L2; Llama-3.1-8B: 128,256 tokens of vocabulary. The sampler's FP32
  // logits and probabilities take 2 x 4 x 128,256 = 1,026,048 bytes a sequence, so
  // 134,217,728 / 1,026,048 = 130.810 sequences fit.
  const GpuSpec& g = Catalog::builtin().gpu("rtx-pro-6000");
  Profile p = default_profile(g);
  p.iteration_overhead_s = 100e-6;
  p.per_sequence_overhead_s = 0.5e-6;
  p.per_sequence_past_l2_s = 1e-6;
  const ModelSpec m = Catalog::builtin().model("llama-3.1-8b");
  const LatencyModel lm(m, g, p, AttentionKind::kFlash);
  BatchShape d;
  d.decode_seqs = 100;
  d.decode_context_tokens = 100 * 700;
  d.block_tokens = 16;
  // 100 sequences, all within L2: 100 + 100 x 0.5 = 150 us.
  CHECK(lm.iteration(d).overhead_seconds == Approx(150e-6));
  // 200 sequences: 100 + 200 x 0.5 + (200 - 130.810) x 1 = 269.190 us, on every costing path.
  d.decode_seqs = 200;
  d.decode_context_tokens = 200 * 700;
  const IterationCost full = lm.iteration(d);
  CHECK(full.overhead_seconds == Approx(269.190e-6).epsilon(1e-5));
  CHECK(lm.iteration(d, OpDetail::kTotals).seconds == full.seconds);
  CHECK(lm.decode_step_seconds(200, 200 * 700, 16) == full.seconds);
  BatchShape mixed;
  mixed.prefill.push_back(PrefillChunk{64, 0, true});
  mixed.decode.assign(199, DecodeSeq{700});
  mixed.block_tokens = 16;
  CHECK(lm.iteration(mixed).overhead_seconds == Approx(269.190e-6).epsilon(1e-5));
  CHECK(lm.iteration(mixed, OpDetail::kTotals).seconds == lm.iteration(mixed).seconds);
  // Under TP 2 the sampler still sees the whole vocabulary (the logits are gathered first).
  const LatencyModel tp2(m, g, p, AttentionKind::kFlash, 2);
  CHECK(tp2.iteration(d).overhead_seconds == full.overhead_seconds);
  // The knee itself: 134,217,728 / (8 x 128,256).
  CHECK(sampler_l2_sequences(134217728.0, 128256.0) == Approx(130.81038));
  CHECK(sampler_l2_sequences(0.0, 128256.0) == 0.0);
}

TEST_CASE("mixed_decode_slope_factor scales decode attention's per-token time beside a chunk",
          "[latency][mixed]") {
  const GpuSpec& g = Catalog::builtin().gpu("rtx-pro-6000");
  Profile p1 = default_profile(g), p2 = p1;
  p2.mixed_decode_slope_factor = 2.0;
  const ModelSpec& m = Catalog::builtin().model("llama-3.1-8b");
  const LatencyModel one(m, g, p1, AttentionKind::kFlash), two(m, g, p2, AttentionKind::kFlash);
  BatchShape mixed;
  mixed.prefill.push_back(PrefillChunk{64, 0, true});
  mixed.decode.assign(128, DecodeSeq{2048});
  mixed.block_tokens = 16;
  BatchShape decode_only = mixed;
  decode_only.prefill.clear();
  // Decode-only batches keep the decode-only cost whatever the factor.
  CHECK(find_op(two.iteration(decode_only), "attention_decode").seconds ==
        find_op(one.iteration(decode_only), "attention_decode").seconds);
  // Beside a chunk, decode attention = launches + layers x (fixed + 2 x slope x t): doubling the
  // slope adds exactly the slope part once more, which is the decode-only time less its fixed
  // part and launches: (2 x a1 - a0) where a0 is the time at t -> 0. Check it as the difference
  // of the two factors' decode times at two contexts: it grows linearly in t.
  const double d1 = find_op(two.iteration(mixed), "attention_decode").seconds -
                    find_op(one.iteration(mixed), "attention_decode").seconds;
  BatchShape longer = mixed;
  longer.decode.assign(128, DecodeSeq{4096});
  const double d2 = find_op(two.iteration(longer), "attention_decode").seconds -
                    find_op(one.iteration(longer), "attention_decode").seconds;
  CHECK(d1 > 0);
  CHECK(d2 == Approx(2 * d1).epsilon(1e-9));
  // The engine's memoised totals agree with the full costing.
  CHECK(two.iteration(mixed, OpDetail::kTotals).seconds == two.iteration(mixed).seconds);
  // The profile file carries it (written only when not 1) and reads it back.
  const Profile back = parse_profile(write_profile_yaml(p2), "p2");
  CHECK(back.mixed_decode_slope_factor == 2.0);
  CHECK(write_profile_yaml(p1).find("mixed_decode_slope_factor") == std::string::npos);
}
