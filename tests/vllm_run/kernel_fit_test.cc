// The import's fit of the forms it adds (validate/fit_profile.h): elementwise kernels served from
// L2 where they fit, and prefill attention from FlashAttention's tiles and waves. Synthetic rows
// whose times are a known profile's own predictions must give that profile back.
#include <catch2/catch.hpp>

#include <vector>

#include "models/catalog.h"
#include "models/latency/profile.h"
#include "validate/fit_profile.h"
#include "validate/kernel_model.h"
#include "validate/vllm_run/llmservingsim_bundle.h"

using namespace kvsim;
using namespace kvsim::validate;

namespace kernel_fit_test {

Measurement row(KernelCase c, const GpuSpec& g, const Profile& truth) {
  c.split = "train";
  Measurement m;
  m.c = c;
  m.reps = 3;
  m.seconds = *predict_seconds(c, g, truth);
  return m;
}

// An elementwise kernel that moves `traffic` bytes (a copy of half of them, as the import's).
KernelCase copy_of(double traffic) {
  KernelCase c;
  c.kind = KernelClass::kMembwCopy;
  c.precision = kernels::Precision::kBf16;
  c.bytes = static_cast<int64_t>(traffic / 2 / 1024) * 1024;
  return c;
}

}  // namespace kernel_fit_test

TEST_CASE("the fit recovers the elementwise L2 speedup and the flash tiles' parameters",
          "[vllm_run][kernel_fit]") {
  using kernel_fit_test::row;
  const GpuSpec& g = Catalog::builtin().gpu("rtx-pro-6000");  // 128 MiB of L2, 188 SMs
  Profile truth = default_profile(g);
  truth.elementwise_floor_s = 2e-6;  // fixed, not fitted (the import sets it from the data)
  truth.elementwise_l2_speedup = 2.5;
  ClassParams& ew = truth.of(OpClass::kElementwise);
  ew.memory_efficiency = 0.6;
  ew.launch_overhead_s = 0.5e-6;
  truth.flash_tiles.fitted = true;
  truth.flash_tiles.wave_overhead_s = 3e-6;
  ClassParams& fa = truth.of(OpClass::kAttentionFlash);
  fa.compute_efficiency = 0.55;
  fa.launch_overhead_s = 1.5e-6;

  std::vector<Measurement> rows;
  // Traffic of 8 MB to 512 MB: below the floor's reach, inside L2 and beyond it (134 MB), so
  // the speedup and the HBM efficiency are both determined.
  for (double mb : {8.0, 16.0, 32.0, 64.0, 100.0, 200.0, 300.0, 512.0}) {
    rows.push_back(row(kernel_fit_test::copy_of(mb * 1e6), g, truth));
  }
  // Llama-3.1-8B's attention at TP 1: chunks of 16 to 2,048 tokens after 0 to 16k cached.
  const BundleDims d = bundle_dims(Catalog::builtin().model("llama-3.1-8b"), 1);
  for (int64_t chunk : {16, 64, 256, 1024, 2048}) {
    for (int64_t cached : {0, 1024, 4096, 16384})
      rows.push_back(row(flash_case(d, chunk, cached), g, truth));
  }

  Profile start = default_profile(g);
  start.elementwise_floor_s = 2e-6;
  start.elementwise_l2_speedup = 2.0;
  start.flash_tiles.fitted = true;
  const FitResult fit = fit_profile(rows, g, start, "synthetic");
  const Profile& p = fit.profile;
  CHECK(p.elementwise_l2_speedup == Approx(2.5).epsilon(1e-4));
  CHECK(p.of(OpClass::kElementwise).memory_efficiency == Approx(0.6).epsilon(1e-4));
  CHECK(p.of(OpClass::kElementwise).launch_overhead_s == Approx(0.5e-6).epsilon(1e-3));
  CHECK(p.flash_tiles.wave_overhead_s == Approx(3e-6).epsilon(1e-4));
  CHECK(p.of(OpClass::kAttentionFlash).compute_efficiency == Approx(0.55).epsilon(1e-4));
  CHECK(p.of(OpClass::kAttentionFlash).launch_overhead_s == Approx(1.5e-6).epsilon(1e-3));
  for (const Residual& r : fit.residuals) CHECK(std::abs(r.rel_error) < 1e-5);
}

TEST_CASE("the import's Q/K norm and embedding rows carry their CTAs and serial loads",
          "[vllm_run][kernel_fit]") {
  // Qwen3-30B-A3B, 32 heads and 4 KV heads: vLLM's rms_norm over the head rows launches
  // 2,048 x (32 + 4) = 73,728 CTAs at 2,048 tokens, at TP 2 too (the bundles' tp2 rows are the
  // tp1 rows). The embedding at 16 tokens runs PyTorch's small-index gather (16 serial loads a
  // thread), at 17 the large-index one (none).
  const ModelSpec m = Catalog::builtin().model("qwen3-30b-a3b");
  for (int tp : {1, 2}) {
    const BundleDims d = bundle_dims(m, tp);
    CHECK(dense_case("qk_norm", 2048, d)->ctas == 73'728);
    CHECK(dense_case("embedding", 16, d)->serial_loads == 16);
    CHECK(dense_case("embedding", 17, d)->serial_loads == 0);
    CHECK(dense_case("rotary_emb", 2048, d)->ctas == 0);
  }
  // Predicted with floor 2 us, launch 0, 55 ns a CTA per SM (188 SMs), HBM efficiency 0.9 and
  // L2 speedup 4: the CTAs take 73,728 / 188 x 55 ns = 21.569362 us, the bytes
  // (2 x 2,048 x 4,608 x 2 = 37,748,736 B, inside the 128 MiB L2) 37,748,736 / (1,597e9 x 0.9
  // x 4) = 6.566 us, so the kernel takes 2 + 21.569362 = 23.569362 us.
  const GpuSpec& g = Catalog::builtin().gpu("rtx-pro-6000");
  Profile p = default_profile(g);
  p.elementwise_floor_s = 2e-6;
  p.elementwise_l2_speedup = 4;
  p.of(OpClass::kElementwise).memory_efficiency = 0.9;
  p.of(OpClass::kElementwise).launch_overhead_s = 0;
  p.elementwise_cta_s = 55e-9;
  const KernelCase qk = *dense_case("qk_norm", 2048, bundle_dims(m, 1));
  CHECK(*predict_seconds(qk, g, p) == Approx(23.569362e-6));
  KernelCase bytes_only = qk;
  bytes_only.ctas = 0;
  CHECK(*predict_seconds(bytes_only, g, p) ==
        Approx(37'748'736.0 / (1'597e9 * 0.9 * 4)).epsilon(1e-3));
}

TEST_CASE("the fit recovers the elementwise latency terms from rows that carry them",
          "[vllm_run][kernel_fit]") {
  // Copies of 8-512 MB (the bytes' parameters), Q/K-norm-like kernels of 1,000 to 150,000 CTAs
  // on 4 MB, and gathers of 1-16 serial loads on 64 KB, timed by a known profile.
  const GpuSpec& g = Catalog::builtin().gpu("rtx-pro-6000");
  Profile truth = default_profile(g);
  truth.elementwise_floor_s = 2e-6;
  truth.elementwise_l2_speedup = 2.5;
  truth.of(OpClass::kElementwise).memory_efficiency = 0.6;
  truth.of(OpClass::kElementwise).launch_overhead_s = 0.5e-6;
  truth.elementwise_cta_s = 55e-9;
  truth.elementwise_serial_load_s = 0.23e-6;
  std::vector<Measurement> rows;
  for (double mb : {8.0, 16.0, 32.0, 64.0, 100.0, 200.0, 300.0, 512.0})
    rows.push_back(kernel_fit_test::row(kernel_fit_test::copy_of(mb * 1e6), g, truth));
  for (double ctas : {1e3, 5e3, 2e4, 5e4, 1.5e5}) {
    KernelCase c = kernel_fit_test::copy_of(4e6);
    c.ctas = ctas;
    rows.push_back(kernel_fit_test::row(c, g, truth));
  }
  for (double loads : {1.0, 3.0, 7.0, 11.0, 16.0}) {
    KernelCase c = kernel_fit_test::copy_of(64e3);
    c.serial_loads = loads;
    rows.push_back(kernel_fit_test::row(c, g, truth));
  }
  Profile start = default_profile(g);
  start.elementwise_floor_s = 2e-6;
  start.elementwise_l2_speedup = 2.0;
  const Profile p = fit_profile(rows, g, start, "synthetic").profile;
  CHECK(p.elementwise_cta_s == Approx(55e-9).epsilon(1e-3));
  CHECK(p.elementwise_serial_load_s == Approx(0.23e-6).epsilon(1e-3));
  CHECK(p.elementwise_l2_speedup == Approx(2.5).epsilon(1e-3));
  // A bundle without such rows (Llama's has no Q/K norm) keeps the term at 0.
  rows.resize(8);
  CHECK(fit_profile(rows, g, start, "synthetic").profile.elementwise_cta_s == 0);
}
