// The Blackwell, H20, MI300X/MI325X and L4 catalog entries: their datasheet figures as the
// catalog reads them (dense peaks, half the sheets' sparse ones), and the profile each borrows
// until calibrated.
#include <catch2/catch.hpp>

#include "models/catalog.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"

using namespace kvsim;
using Catch::Matchers::Contains;

TEST_CASE("2026 GPUs carry their datasheet figures", "[models][gpu]") {
  const Catalog& c = Catalog::builtin();
  // HGX B200: 1,440 GB and 64 TB/s over 8 GPUs; 144 / 72 / 36 PFLOPS sparse FP4 / FP8 / BF16
  // over 8 -> dense per GPU 9 / 4.5 / 2.25 PFLOPS.
  const GpuSpec& b = c.gpu("b200");
  CHECK(b.memory_bytes == 180'000'000'000);
  CHECK(b.hbm_bytes_per_s == Approx(8e12));
  CHECK(b.fp16_flops == Approx(2.25e15));
  CHECK(b.fp8_flops == Approx(4.5e15));
  CHECK(b.fp4_flops == Approx(9e15));
  CHECK(b.nvlink_bytes_per_s == Approx(1.8e12));
  // GB200 NVL72: 13.4 TB over 72 = 186 GB; 360 PFLOPS sparse BF16 over 72 = 2.5 dense.
  CHECK(c.gpu("gb200").memory_bytes == 186'000'000'000);
  CHECK(c.gpu("gb200").fp16_flops == Approx(2.5e15));
  CHECK(c.gpu("h20").fp8_flops == Approx(296e12));
  CHECK(c.gpu("mi300x").memory_bytes == 192'000'000'000);
  CHECK(c.gpu("mi300x").fp16_flops == Approx(1307.4e12));
  CHECK(c.gpu("mi325x").memory_bytes == 256'000'000'000);
  CHECK(c.gpu("mi325x").hbm_bytes_per_s == Approx(6e12));
  CHECK(c.gpu("l4").fp8_flops == Approx(242.5e12));
  CHECK(c.gpu("l4").nvlink_bytes_per_s == 0);
}

TEST_CASE("2026 GPUs' profiles are derived and say from what", "[models][gpu][profile]") {
  const Catalog& c = Catalog::builtin();
  for (const char* gpu : {"b200", "gb200", "h20", "mi300x", "mi325x", "l4"}) {
    INFO(gpu);
    CHECK_THAT(default_profile(c.gpu(gpu)).source, Contains("derived"));
  }
  // The H20 is Hopper (compute capability 9.0): vLLM's default flash kernel there is FA3.
  CHECK(default_flash_kernel(c.gpu("h20")) == FlashKernel::kFa3);
  CHECK(default_flash_kernel(c.gpu("b200")) == FlashKernel::kFa2);
}

TEST_CASE("A decode step's bound follows each GPU's bandwidth", "[models][gpu][latency]") {
  // Llama-3-8B BF16 decoding one sequence is memory-bound: the lower bound reads the same bytes
  // on every GPU, so its time scales as 1 / bandwidth: B200 (8 TB/s) against L4 (300 GB/s).
  const Catalog& c = Catalog::builtin();
  const ModelSpec& m = c.model("llama-3-8b");
  const auto bound = [&](const char* gpu) {
    const GpuSpec& g = c.gpu(gpu);
    return LatencyModel(m, g, default_profile(g), AttentionKind::kFlash)
        .decode_step_lower_bound_seconds(1, 1000);
  };
  CHECK(bound("l4") == Approx(bound("b200") * 8000.0 / 300.0).epsilon(1e-3));
}
