#include <catch2/catch.hpp>

#include <cmath>

#include "models/catalog.h"
#include "models/latency/profile.h"
#include "validate/fit_profile.h"
#include "validate/grid.h"
#include "validate/kernel_model.h"

using namespace kvsim;
using namespace kvsim::validate;

TEST_CASE("a GEMM's prediction is the roofline of its FLOPs and bytes", "[validate][model]") {
  const GpuSpec gpu = Catalog::builtin().gpu("a100-sxm4-80gb");
  Profile p = default_profile(gpu);
  p.of(OpClass::kGemm) = {.compute_efficiency = 0.5, .memory_efficiency = 0.8, .launch_overhead_s = 3e-6};
  KernelCase c;
  c.kind = KernelClass::kGemm;
  for (auto [m, n, k] : {std::tuple{1, 4096, 4096}, std::tuple{4096, 4096, 4096}}) {
    c.gemm = {.m = m, .n = n, .k = k};
    const double compute = c.flops() / (gpu.fp16_flops * 0.5);
    const double memory = c.bytes_moved() / (gpu.hbm_bytes_per_s * 0.8);
    CHECK(*predict_seconds(c, gpu, p) == Approx(std::max(compute, memory) + 3e-6).epsilon(1e-9));
  }
  c.kind = KernelClass::kMembwRead;
  c.bytes = 1 << 20;
  CHECK_FALSE(predict_seconds(c, gpu, p).has_value());
}

TEST_CASE("a copy maps onto the model's elementwise traffic", "[validate][model]") {
  const GpuSpec gpu = Catalog::builtin().gpu("h200");
  Profile p = default_profile(gpu);
  p.of(OpClass::kElementwise).memory_efficiency = 0.9;
  p.of(OpClass::kElementwise).launch_overhead_s = 0;
  KernelCase c;
  c.kind = KernelClass::kMembwCopy;
  c.bytes = int64_t{256} << 20;
  CHECK(*predict_seconds(c, gpu, p) == Approx(2.0 * c.bytes / (gpu.hbm_bytes_per_s * 0.9)).epsilon(1e-9));
}

// Synthetic measurements from a planted profile must give the planted coefficients back.
TEST_CASE("planted coefficients are recovered within 5% from synthetic measurements", "[validate][fit]") {
  const GpuSpec gpu = Catalog::builtin().gpu("h100-sxm");
  const Grid g = parse_grid(R"(
name: planted
holdout_every: 4
kernels:
  - {class: flash, heads: 16, kv_heads: [16, 4], seq: [128, 512, 1024, 2048, 4096, 8192], head_dim: [64, 128], causal: true}
  - {class: paged_decode, batch: [1, 8, 64], heads: 32, kv_heads: 8, head_dim: 128, context: [256, 2048, 16384], block_size: [8, 16, 32, 64]}
  - {class: gemm, m: [1, 16, 128, 1024, 8192], n: [4096, 14336], k: [4096]}
)", "planted.yaml", "cuda");
  Profile planted = default_profile(gpu);
  planted.of(OpClass::kAttentionFlash) = {.compute_efficiency = 0.62, .memory_efficiency = 0.7, .launch_overhead_s = 4e-6};
  planted.flash_seq_half_tokens = 700;
  planted.flash_head_dim_exponent = 0.6;
  planted.of(OpClass::kAttentionDecode) = {.compute_efficiency = 0.5, .memory_efficiency = 0.77, .launch_overhead_s = 6e-6};
  planted.decode_context_half_tokens = 300;
  planted.paged_block_half_tokens = 5;
  planted.of(OpClass::kGemm) = {.compute_efficiency = 0.71, .memory_efficiency = 0.83, .launch_overhead_s = 5e-6};
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
