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
