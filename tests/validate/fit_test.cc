#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "models/catalog.h"
#include "models/latency/profile.h"
#include "validate/fit_profile.h"
#include "validate/grid.h"
#include "validate/kernel_model.h"

using namespace kvsim;
using namespace kvsim::validate;

TEST_CASE("a GEMM's prediction is its best tiling's waves, combined with its memory time",
          "[validate][model]") {
  // A100: 108 SMs, 312 TFLOP/s, 2,039 GB/s; gemm compute 0.5, memory 0.8, 3 us per GEMM; tile
  // half-intensity h = 8, combine exponent 3 (the built-in values).
  const GpuSpec gpu = Catalog::builtin().gpu("a100-sxm4-80gb");
  Profile p = default_profile(gpu);
  p.of(OpClass::kGemm) = {
      .compute_efficiency = 0.5, .memory_efficiency = 0.8, .launch_overhead_s = 3e-6};
  KernelCase c;
  c.kind = KernelClass::kGemm;
  const double sm_s = 108 / (312e12 * 0.5);  // seconds per FLOP of one SM at the full-wave rate
  const double bw = 2039e9 * 0.8;
  auto slowdown = [](double tm, double tn) {  // 1 / (I/(I + 8) x 72/64), I = tm tn / (tm + tn)
    const double i = tm * tn / (tm + tn);
    return std::max(0.5, 64 * (i + 8) / (i * 72));
  };
  auto combine = [](double a, double b) { return std::cbrt(a * a * a + b * b * b); };
  // m = 1, n = k = 4096 (batch-1 decode through a 4096 x 4096 weight). Bytes 2 (4096^2 + 2 x
  // 4096) = 33,570,816: 20.58 us at 1.63 TB/s. The search (10 tile shapes x split-K while one
  // wave holds them) takes the least (compute^3 + memory^3): 64x64 (64 tiles, one wave) costs
  // 25.81 us of compute; the 16-row tile 16x128 split 2 (32 x 2 = 64 tiles, one wave of
  // half-k tiles, I = 14.2, 1.389 x slower per FLOP) 2 x 16 x 128 x 2048 x sm_s x 1.389 =
  // 8.07 us, memory 20.58 + 8 x 4096 x 2 B / 1.63 TB/s = 20.62 us. Combined:
  // (8.07^3 + 20.62^3)^(1/3) = 21.02 us, + 3 us = 24.02 us (the roofline said 23.58).
  c.gemm = {.m = 1, .n = 4096, .k = 4096};
  {
    const double compute = 2.0 * 16 * 128 * 2048 * sm_s * slowdown(16, 128);
    const double memory = (c.bytes_moved() + 8.0 * 4096 * 2) / bw;
    CHECK(compute == Approx(8.066e-6).epsilon(1e-3));
    CHECK(*predict_seconds(c, gpu, p) == Approx(combine(compute, memory) + 3e-6).epsilon(1e-9));
    CHECK(*predict_seconds(c, gpu, p) == Approx(24.02e-6).epsilon(1e-3));
  }
  // m = n = k = 4096: 256x128 tiles (I = 85.3, 0.972 x the full-wave time per FLOP), 16 x 32 =
  // 512 tiles = 5 waves of 108 (4.74 rounded up): 5 x 2 x 256 x 128 x 4096 x sm_s x 0.972 =
  // 903.4 us; 128x128 needs 10 waves of 92.9 us, 64x64 38 of 25.8. Memory 61.7 us barely adds:
  // 903.5 + 3 = 906.5 us, 2.9% over the whole-GPU roofline of 881 us: the last wave is 74% full.
  c.gemm = {.m = 4096, .n = 4096, .k = 4096};
  {
    const double compute = 5 * 2.0 * 256 * 128 * 4096 * sm_s * slowdown(256, 128);
    const double memory = c.bytes_moved() / bw;
    CHECK(*predict_seconds(c, gpu, p) == Approx(combine(compute, memory) + 3e-6).epsilon(1e-9));
    CHECK(*predict_seconds(c, gpu, p) == Approx(906.5e-6).epsilon(1e-3));
  }
  c.kind = KernelClass::kMembwRead;
  c.bytes = 1 << 20;
  CHECK_FALSE(predict_seconds(c, gpu, p).has_value());
}

TEST_CASE("GEMM time steps up just past a multiple of 128 rows and is flat within a wave",
          "[validate][model]") {
  // Llama-2-7B's gate+up GEMM (k 4096, n 22016) on the built-in A100 profile. Up to 128 rows
  // one row of tiles covers M (128x256: 86 tiles, one wave of 108 SMs); 136 rows need a second
  // row: 172 tiles, 2 waves. Time jumps from 128 to 136 rows by far more than the 6% more rows
  // (model 155.5 -> 186.5 us, +20%; Vidur's A100 measurement 157 -> 205 us, +31%; the roofline
  // +6%), and 136 -> 192 rows (the same tiling) adds little (189.1 us, +1.4%; measured 186.5).
  const GpuSpec gpu = Catalog::builtin().gpu("a100-sxm4-80gb");
  const Profile p = default_profile(gpu);
  KernelCase c;
  c.kind = KernelClass::kGemm;
  auto t = [&](int64_t m) {
    c.gemm = {.m = m, .n = 22016, .k = 4096};
    return *predict_seconds(c, gpu, p);
  };
  CHECK(t(136) / t(128) > 1.15);
  CHECK(t(192) / t(136) < 1.02);
}

TEST_CASE("an elementwise kernel takes at least the profile's floor", "[validate][model]") {
  // A copy of 64 KiB moves 128 KiB: 0.14 us at 0.463 x 2,039 GB/s, far under the A100 floor of
  // 5.4 us; 256 MiB moves 512 MiB: 568.6 us, the floor no longer matters.
  const GpuSpec gpu = Catalog::builtin().gpu("a100-sxm4-80gb");
  const Profile p = default_profile(gpu);
  KernelCase c;
  c.kind = KernelClass::kMembwCopy;
  c.bytes = 64 << 10;
  CHECK(*predict_seconds(c, gpu, p) == Approx(5.4e-6).epsilon(1e-12));
  c.bytes = int64_t{256} << 20;
  CHECK(*predict_seconds(c, gpu, p) == Approx(2.0 * c.bytes / (2039e9 * 0.463)).epsilon(1e-9));
}

TEST_CASE("a copy maps onto the model's elementwise traffic", "[validate][model]") {
  const GpuSpec gpu = Catalog::builtin().gpu("h200");
  Profile p = default_profile(gpu);
  p.of(OpClass::kElementwise).memory_efficiency = 0.9;
  p.of(OpClass::kElementwise).launch_overhead_s = 0;
  KernelCase c;
  c.kind = KernelClass::kMembwCopy;
  c.bytes = int64_t{256} << 20;
  CHECK(*predict_seconds(c, gpu, p) ==
        Approx(2.0 * c.bytes / (gpu.hbm_bytes_per_s * 0.9)).epsilon(1e-9));
}

// Synthetic measurements from a planted profile must give the planted coefficients back.
TEST_CASE("planted coefficients are recovered within 5% from synthetic measurements",
          "[validate][fit]") {
  const GpuSpec gpu = Catalog::builtin().gpu("h100-sxm");
  const Grid g = parse_grid(R"(
name: planted
holdout_every: 4
kernels:
  - {class: flash, heads: 16, kv_heads: [16, 4], seq: [128, 512, 1024, 2048, 4096, 8192], head_dim: [64, 128], causal: true}
  - {class: paged_decode, batch: [1, 8, 64], heads: 32, kv_heads: 8, head_dim: 128, context: [256, 2048, 16384], block_size: [8, 16, 32, 64]}
  - {class: gemm, m: [1, 16, 128, 1024, 8192], n: [4096, 14336], k: [4096]}
)",
                            "planted.yaml", "cuda");
  Profile planted = default_profile(gpu);
  planted.of(OpClass::kAttentionFlash) = {
      .compute_efficiency = 0.62, .memory_efficiency = 0.7, .launch_overhead_s = 4e-6};
  planted.flash_seq_half_tokens = 700;
  planted.flash_head_dim_exponent = 0.6;
  planted.of(OpClass::kAttentionDecode) = {
      .compute_efficiency = 0.5, .memory_efficiency = 0.77, .launch_overhead_s = 6e-6};
  planted.decode_context_half_tokens = 300;
  planted.paged_block_half_tokens = 5;
  planted.of(OpClass::kGemm) = {
      .compute_efficiency = 0.71, .memory_efficiency = 0.83, .launch_overhead_s = 5e-6};
  std::vector<Measurement> rows;
  for (const KernelCase& c : g.cases) {
    Measurement m;
    m.c = c;
    m.reps = 1;
    m.seconds = *predict_seconds(c, gpu, planted);
    rows.push_back(m);
  }
  const FitResult fit = fit_profile(rows, gpu, default_profile(gpu), "test");
  const Profile& p = fit.profile;
  auto within5 = [](double got, double want) { return std::abs(got / want - 1.0) <= 0.05; };
  CHECK(within5(p.of(OpClass::kAttentionFlash).compute_efficiency, 0.62));
  CHECK(within5(p.flash_seq_half_tokens, 700));
  CHECK(within5(p.flash_head_dim_exponent, 0.6));
  CHECK(within5(p.of(OpClass::kAttentionDecode).memory_efficiency, 0.77));
  CHECK(within5(p.decode_context_half_tokens, 300));
  CHECK(within5(p.paged_block_half_tokens, 5));
  CHECK(within5(p.of(OpClass::kGemm).compute_efficiency, 0.71));
  CHECK(within5(p.of(OpClass::kGemm).memory_efficiency, 0.83));
  CHECK(within5(p.of(OpClass::kGemm).launch_overhead_s, 5e-6));
  for (const ClassFit& c : fit.classes) {
    INFO(op_class_name(c.op_class));
    CHECK(c.rms_rel < 1e-3);
  }
}

TEST_CASE("an fp32 GEMM's prediction reads 4-byte weights", "[validate][model]") {
  // The roofline (no SM count, as for an inline GPU spec): A100's 2,039 GB/s and 312 TFLOP/s at
  // efficiency 1, no launch overhead. m = 1, n = k = 4096: 2 x 4096^2 = 33.6 MFLOP, 0.108 us.
  // The latency model reads the weights at the model's dtype and the activations at 2 bytes
  // (models/latency: kActBytes), so
  //   fp16: 4096^2 x 2 + 4096 x 2 + 4096 x 2 = 33,570,816 B -> 16.4644 us
  //   fp32: 4096^2 x 4 + 4096 x 2 + 4096 x 2 = 67,125,248 B -> 32.9207 us
  // (the case's own bytes_moved counts all three at 4 bytes at fp32: 67,141,632).
  GpuSpec gpu = Catalog::builtin().gpu("a100-sxm4-80gb");
  gpu.sm_count = 0;
  Profile p = default_profile(gpu);
  p.of(OpClass::kGemm) = {.compute_efficiency = 1, .memory_efficiency = 1, .launch_overhead_s = 0};
  KernelCase c;
  c.kind = KernelClass::kGemm;
  c.gemm = {.m = 1, .n = 4096, .k = 4096};
  CHECK(*predict_seconds(c, gpu, p) == Approx(33570816.0 / 2039e9).epsilon(1e-12));
  c.precision = kernels::Precision::kFp32;
  CHECK(*predict_seconds(c, gpu, p) == Approx(67125248.0 / 2039e9).epsilon(1e-12));
  CHECK(c.bytes_moved() == 67141632.0);
}

// A KernelPredictor keeps one model per kernel shape, and its memos, across cases: each case's
// prediction must be the bits of a fresh model's (predict_seconds), whatever came before it.
// The cases run forward and then backward, so the GEMM memo that 8,192-row cases grew serves
// the 1-row ones, and cases of different shapes (n, k, kv_heads, head_dim, dtype, native or
// flash) must each find their own model.
TEST_CASE("one predictor for many cases gives each case a fresh model's bits",
          "[validate][model]") {
  const GpuSpec gpu = Catalog::builtin().gpu("h100-sxm");
  const Grid g = parse_grid(R"(
name: reuse
kernels:
  - {class: flash, heads: 16, kv_heads: [16, 4], seq: [128, 4096], head_dim: [64, 128], causal: true}
  - {class: native, heads: 16, kv_heads: 16, seq: [128, 1024], head_dim: 64, causal: true}
  - {class: paged_decode, batch: [1, 64], heads: 32, kv_heads: 8, head_dim: 128, context: [256, 16384], block_size: [16, 32]}
  - {class: gemm, dtypes: [fp16, bf16], m: [1, 16, 129, 1024, 8192, 20000], n: [4096, 14336],
     k: [4096, 1024]}
  - {class: membw_copy, bytes_mib: [1, 256]}
)",
                            "reuse.yaml", "cuda");
  const Profile p = default_profile(gpu);
  const KernelPredictor predictor(gpu, p);
  std::vector<const KernelCase*> order;
  for (const KernelCase& c : g.cases) order.push_back(&c);
  for (auto it = g.cases.rbegin(); it != g.cases.rend(); ++it) order.push_back(&*it);
  REQUIRE(order.size() > 60);
  for (const KernelCase* c : order) {
    const auto fresh = predict_seconds(*c, gpu, p);
    REQUIRE(fresh.has_value());
    CHECK(*predictor.seconds(*c) == *fresh);  // bit for bit
  }
}
