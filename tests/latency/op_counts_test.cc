// FLOP and byte counts of every operation against formulas derived by hand (docs/latency.md),
// for an MHA model (Llama-2-7B), a GQA model (Llama-3-8B) and an MoE model (Mixtral-8x7B).
#include <catch2/catch.hpp>

#include "tests/latency/latency_test_util.h"

using namespace kvsim;
using kvsim::test::decode_batch;
using kvsim::test::find_op;
using kvsim::test::make_model;
using kvsim::test::prefill_batch;

namespace {

struct Dims {
  double L, h, H, Hkv, D, f, V;
};

Dims dims(const std::string& name) {
  const ModelSpec& m = Catalog::builtin().model(name);
  return {double(m.layers),   double(m.hidden), double(m.heads), double(m.kv_heads),
          double(m.head_dim), double(m.ffn),    double(m.vocab)};
}

// Prefill of S tokens from an empty cache: every linear layer, causal flash attention.
void check_prefill(const std::string& name) {
  const Dims d = dims(name);
  const double S = 1000;
  const auto c = make_model(name).iteration(prefill_batch(1000));
  const double qkv_n = (d.H + 2 * d.Hkv) * d.D;
  CHECK(find_op(c, "qkv_proj").flops == Approx(d.L * 2 * S * d.h * qkv_n));
  CHECK(find_op(c, "qkv_proj").bytes ==
        Approx(d.L * 2 * (d.h * qkv_n + S * d.h + S * qkv_n)));  // FP16 weights, in, out
  CHECK(find_op(c, "o_proj").flops == Approx(d.L * 2 * S * d.H * d.D * d.h));
  CHECK(find_op(c, "mlp_gate_up").flops == Approx(d.L * 2 * S * d.h * 2 * d.f));
  CHECK(find_op(c, "mlp_gate_up").bytes ==
        Approx(d.L * 2 * (d.h * 2 * d.f + S * d.h + S * 2 * d.f)));
  CHECK(find_op(c, "mlp_down").flops == Approx(d.L * 2 * S * d.f * d.h));
  // Causal: query i sees i + 1 keys; QK^T and PV are 2 FLOPs per multiply-add each.
  CHECK(find_op(c, "attention_prefill").flops == Approx(d.L * 4 * d.D * d.H * S * (S + 1) / 2));
  CHECK(find_op(c, "attention_prefill").bytes ==
        Approx(d.L * (2 * S * d.H * d.D * 2 + 2 * S * d.Hkv * d.D * 2)));
  CHECK(find_op(c, "kv_cache_write").bytes == Approx(d.L * S * 2 * d.Hkv * d.D * (2 + 2)));
  // Logits only for the last position of the prompt.
  CHECK(find_op(c, "lm_head").flops == Approx(2 * d.h * d.V));
  CHECK(find_op(c, "lm_head").bytes == Approx(2 * (d.h * d.V + d.h + d.V)));
  CHECK(find_op(c, "embedding").bytes == Approx(S * d.h * (2 + 2)));
  // Linear-layer FLOPs = 2 x (non-embedding parameters in the layers) x tokens.
  const ModelSpec& m = Catalog::builtin().model(name);
  const double layer_params =
      double(m.param_count() - 2 * int64_t{m.vocab} * m.hidden - m.hidden) / m.layers -
      2 * d.h;  // minus the two norm vectors
  const double linear = find_op(c, "qkv_proj").flops + find_op(c, "o_proj").flops +
                        find_op(c, "mlp_gate_up").flops + find_op(c, "mlp_down").flops;
  CHECK(linear == Approx(2 * S * d.L * layer_params));
}

void check_decode(const std::string& name) {
  const Dims d = dims(name);
  // Three sequences, contexts 100 + 2000 + 5000 = 7100.
  const auto c = make_model(name).iteration(decode_batch({100, 2000, 5000}));
  const double n = 3, T = 7100;
  CHECK(find_op(c, "attention_decode").flops == Approx(d.L * 4 * d.D * d.H * T));
  CHECK(find_op(c, "attention_decode").bytes ==
        Approx(d.L * (T * 2 * d.Hkv * d.D * 2 + n * 2 * d.H * d.D * 2)));
  CHECK(find_op(c, "qkv_proj").flops == Approx(d.L * 2 * n * d.h * (d.H + 2 * d.Hkv) * d.D));
  CHECK(find_op(c, "lm_head").flops == Approx(2 * n * d.h * d.V));
}

}  // namespace

TEST_CASE("prefill counts match the formulas: Llama-2-7B (MHA)", "[latency][counts]") {
  check_prefill("llama-2-7b");
}

TEST_CASE("prefill counts match the formulas: Llama-3-8B (GQA, 8 KV heads)", "[latency][counts]") {
  check_prefill("llama-3-8b");
}

TEST_CASE("decode counts match the formulas for both models", "[latency][counts]") {
  check_decode("llama-2-7b");
  check_decode("llama-3-8b");
}

TEST_CASE("native attention computes the whole rectangle and moves the scores through HBM",
          "[latency][counts]") {
  const Dims d = dims("llama-2-7b");
  const double S = 2048, P = 1024;  // a chunk of 2048 tokens after 1024 cached ones
  const auto c =
      make_model("llama-2-7b", AttentionKind::kNative).iteration(prefill_batch(2048, 1024));
  const double scores = d.H * S * (P + S);
  const OpCost& a = find_op(c, "attention_prefill");
  CHECK(a.op_class == OpClass::kAttentionNative);
  CHECK(a.flops == Approx(d.L * 4 * d.D * scores));
  CHECK(a.bytes ==
        Approx(d.L * (2 * S * d.H * d.D * 2 + 2 * (P + S) * d.Hkv * d.D * 2 + 4 * 2 * scores)));
  // Flash over the same chunk: only the causal pairs.
  const auto f = make_model("llama-2-7b").iteration(prefill_batch(2048, 1024));
  CHECK(find_op(f, "attention_prefill").flops ==
        Approx(d.L * 4 * d.D * d.H * (S * P + S * (S + 1) / 2)));
}

TEST_CASE("seed B: 16,384-token flash prefill of the 7B MHA model needs 2.83e14 FLOPs",
          "[latency][counts]") {
  // facts.md 7 counts 2.91e14 with the embedding and the LM head on every token; without them
  // (logits for the last position only) the linear layers are 2 x 6.476e9 x 16384.
  const auto c = make_model("seed-7b-mha").lower_bound(prefill_batch(16384));
  CHECK(c.flops == Approx(2.826e14).epsilon(1e-3));
  CHECK(find_op(c, "attention_prefill").flops == Approx(7.037e13).epsilon(1e-3));
  CHECK(c.ops_seconds > 0.9);  // >= 906 ms at 312 TFLOP/s; seed B claims 210.4 ms
}

TEST_CASE("MoE reads only the experts its tokens route to", "[latency][counts]") {
  const ModelSpec& m = Catalog::builtin().model("mixtral-8x7b");
  const double h = m.hidden, f = m.ffn, L = m.layers;
  // One decode token routes to 2 of 8 experts: 2 experts' weights are read, and each expert
  // reads the token's hidden state and writes its own rows.
  const auto one = make_model("mixtral-8x7b").iteration(decode_batch({1000}));
  CHECK(find_op(one, "mlp_gate_up").bytes == Approx(L * 2 * (2 * h * 2 * f + 2 * h + 2 * 2 * f)));
  CHECK(find_op(one, "mlp_gate_up").flops == Approx(L * 2 * 2 * h * 2 * f));
  CHECK(find_op(one, "router").flops == Approx(L * 2 * h * 8));
  // 1000 prefill tokens touch all 8 (to within 1e-9).
  const auto many = make_model("mixtral-8x7b").iteration(prefill_batch(1000));
  CHECK(find_op(many, "mlp_down").bytes == Approx(L * 2 * (8 * f * h + 2000 * f + 2000 * h)));
}

TEST_CASE("tensor parallelism splits the work and adds all-reduces", "[latency][counts]") {
  const auto one = make_model("llama-3-70b", AttentionKind::kFlash, 0, 1, "h100-sxm")
                       .iteration(prefill_batch(512));
  const auto four = make_model("llama-3-70b", AttentionKind::kFlash, 0, 4, "h100-sxm")
                        .iteration(prefill_batch(512));
  CHECK(find_op(four, "qkv_proj").flops == Approx(find_op(one, "qkv_proj").flops / 4));
  CHECK(find_op(four, "attention_prefill").flops ==
        Approx(find_op(one, "attention_prefill").flops / 4));
  CHECK_FALSE(kvsim::test::has_op(one, "allreduce"));
  const ModelSpec& m = Catalog::builtin().model("llama-3-70b");
  // Ring all-reduce, twice per layer: each GPU moves 2 (t-1)/t of the payload.
  CHECK(find_op(four, "allreduce").bytes ==
        Approx(2.0 * m.layers * 2 * 3.0 / 4 * 512 * m.hidden * 2));
  CHECK(four.seconds < one.seconds);
  CHECK_THROWS_AS(make_model("llama-3-70b", AttentionKind::kFlash, 0, 3), InputError);
}
