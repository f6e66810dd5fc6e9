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
  CHECK(b.hbm_bytes_per_s == Approx(8e12));
  CHECK(b.fp16_flops == Approx(2.25e15));
  CHECK(b.fp8_flops == Approx(4.5e15));
  CHECK(b.fp4_flops == Approx(9e15));
  CHECK(b.nvlink_bytes_per_s == Approx(1.8e12));
  // GB200 NVL72: 360 PFLOPS sparse BF16 over 72 = 2.5 dense.
  CHECK(c.gpu("gb200").fp16_flops == Approx(2.5e15));
  CHECK(c.gpu("h20").fp8_flops == Approx(296e12));
  CHECK(c.gpu("mi300x").fp16_flops == Approx(1307.4e12));
  CHECK(c.gpu("mi325x").hbm_bytes_per_s == Approx(6e12));
  CHECK(c.gpu("l4").fp8_flops == Approx(242.5e12));
  CHECK(c.gpu("l4").nvlink_bytes_per_s == 0);
}

TEST_CASE("2026 GPUs hold what the driver reports, not the datasheet's decimal size",
          "[models][gpu]") {
  // vLLM multiplies gpu_memory_utilization into torch.cuda.mem_get_info()'s total, so the pool
  // follows the driver's figure (models/catalog/gpus.yaml cites each): B200 178.35 GiB, GB200
  // 184.31 GiB, H20 95.11 GiB (nvidia-smi's 97,871 MiB less the H100's 0.47 GiB), MI325X
  // 255.98 GiB, L4 22.03 GiB, each x 2^30 rounded to the byte; MI300X rocm-smi's exact
  // 206,141,652,992 B (191.98 GiB). Read as decimal GB the datasheets' 180, 186, 96, 192 and
  // 256 were 6% to 7% below the driver (HBM stacks are binary sizes: 180 GB read as 10^9 bytes
  // is 167.64 GiB) and the L4's 24 was 1.5% above it.
  const Catalog& c = Catalog::builtin();
  CHECK(c.gpu("b200").memory_bytes == 191'501'854'310);
  CHECK(c.gpu("gb200").memory_bytes == 197'901'355'581);
  CHECK(c.gpu("h20").memory_bytes == 102'123'584'881);
  CHECK(c.gpu("mi300x").memory_bytes == 206'141'652'992);
  CHECK(c.gpu("mi325x").memory_bytes == 274'856'432'108);
  CHECK(c.gpu("l4").memory_bytes == 23'654'532'383);
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
