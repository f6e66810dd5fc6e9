// Pipeline stages and quantized weights/KV in the latency model; the
// figures follow docs/latency.md "Parallelism and quantization".
#include <catch2/catch.hpp>

#include "tests/latency/latency_test_util.h"

using namespace kvsim;
using kvsim::test::decode_batch;
using kvsim::test::find_op;
using kvsim::test::has_op;
using kvsim::test::prefill_batch;

namespace {
LatencyModel build(ModelSpec m, const char* gpu, int tp, int pp = 1) {
  const GpuSpec& g = Catalog::builtin().gpu(gpu);
  return LatencyModel(std::move(m), g, default_profile(g), AttentionKind::kFlash, tp, pp);
}
const ModelSpec& llama3_8b() { return Catalog::builtin().model("llama-3-8b"); }
}  // namespace

TEST_CASE("PP adds p - 1 sends of the batch's activations and keeps every layer",
          "[latency][parallel]") {
  const auto one = build(llama3_8b(), "h100-sxm", 1, 1).iteration(prefill_batch(1000));
  const auto pp4 = build(llama3_8b(), "h100-sxm", 1, 4).iteration(prefill_batch(1000));
  CHECK_FALSE(has_op(one, "pp_send"));
  // 3 boundaries, each sending the hidden states and the residual (vLLM's IntermediateTensors),
  // 1000 tokens x 4096 hidden x 2 bytes each: 3 x 2 x 8,192,000 = 49,152,000 bytes.
  CHECK(find_op(pp4, "pp_send").bytes == 49'152'000.0);
  // The stages run in turn: the same layer operations, plus the sends.
  CHECK(find_op(pp4, "qkv_proj").seconds == find_op(one, "qkv_proj").seconds);
  CHECK(pp4.seconds == Approx(one.seconds + find_op(pp4, "pp_send").seconds).epsilon(1e-12));
  CHECK_THROWS_AS(build(llama3_8b(), "h100-sxm", 1, 33), InputError);
}

TEST_CASE("GEMMs read weights at weights_dtype; decode attention reads KV at kv_cache_dtype",
          "[latency][quant]") {
  ModelSpec int4 = llama3_8b();
  int4.weight_dtype = DType::kInt4;
  ModelSpec fp8kv = llama3_8b();
  fp8kv.kv_dtype = DType::kFp8;
  const auto dec = decode_batch({4096});
  const auto base = build(llama3_8b(), "a100-sxm4-80gb", 1).iteration(dec);
  const auto w4 = build(int4, "a100-sxm4-80gb", 1).iteration(dec);
  const auto k8 = build(fp8kv, "a100-sxm4-80gb", 1).iteration(dec);
  // qkv_proj of one row: 32 layers x 4096 x 6144 weights, plus 4096 + 6144 activations at 2
  // bytes. FP16: 2 bytes per weight; AWQ INT4: 0.5 + 2.5 / 128 = 0.51953125.
  const double w = 32.0 * 4096 * 6144;
  const double act = 32.0 * (4096 + 6144) * 2;
  CHECK(find_op(base, "qkv_proj").bytes == Approx(w * 2 + act).epsilon(1e-12));
  CHECK(find_op(w4, "qkv_proj").bytes == Approx(w * 0.51953125 + act).epsilon(1e-12));
  // LM head stays 16-bit: 4096 x 128256 x 2 + (4096 + 128256) x 2.
  CHECK(find_op(w4, "lm_head").bytes == Approx(4096.0 * 128256 * 2 + (4096 + 128256) * 2.0));
  // Decode attention: the KV of 4096 tokens, 32 layers x 2 x 8 heads x 128 x bytes, halves
  // with FP8 KV (the query and output reads, 32 x 2 x 4096 x 2, do not change).
  const double qo = 32.0 * 2 * 4096 * 2;
  CHECK(find_op(base, "attention_decode").bytes - qo ==
        Approx(2 * (find_op(k8, "attention_decode").bytes - qo)).epsilon(1e-12));
}

TEST_CASE("FP8 weights compute at the FP8 peak only where the GPU has one", "[latency][quant]") {
  ModelSpec fp8 = llama3_8b();
  fp8.weight_dtype = DType::kFp8;
  const auto pre = prefill_batch(4000);
  // H100: fp8_tflops 1978.9 = 2x the FP16 peak: the compute time of a compute-bound GEMM
  // halves. A100 has no FP8 tensor cores: the same compute time as FP16.
  const auto h_fp16 = build(llama3_8b(), "h100-sxm", 1).lower_bound(pre);
  const auto h_fp8 = build(fp8, "h100-sxm", 1).lower_bound(pre);
  CHECK(find_op(h_fp8, "mlp_gate_up").compute_s ==
        Approx(find_op(h_fp16, "mlp_gate_up").compute_s * 989.4 / 1978.9).epsilon(1e-12));
  CHECK(find_op(h_fp8, "lm_head").compute_s == find_op(h_fp16, "lm_head").compute_s);
  const auto a_fp16 = build(llama3_8b(), "a100-sxm4-80gb", 1).lower_bound(pre);
  const auto a_fp8 = build(fp8, "a100-sxm4-80gb", 1).lower_bound(pre);
  CHECK(find_op(a_fp8, "mlp_gate_up").compute_s == find_op(a_fp16, "mlp_gate_up").compute_s);
}
