// The CUDA backend through the harness: tagged [gpu]; without a device it prints why and ctest
// lists it as skipped (tests/gpu_skip.h). With a device, a backend that fails to start fails.
#include <catch2/catch.hpp>

#include "tests/gpu_skip.h"
#include "tests/validate/shell.h"
#include "validate/backend.h"
#include "validate/commands.h"
#include "validate/measurements.h"

using namespace kvsim::validate;

TEST_CASE("CUDA backend measures a small grid with every check passing", "[gpu][validate]") {
  if (!kvsim::test::gpu_available_or_skip()) return;
  REQUIRE_NOTHROW(make_backend("cuda"));
  const auto dir = kvsim::test::fresh_dir("kvsim-gpu");
  std::ofstream(dir / "g.yaml") << R"(
name: gpu-smoke
timing: {warmup: 1, repetitions: 3}
kernels:
  - {class: native, dtypes: [fp16, bf16], heads: 4, kv_heads: [4, 2], seq: [100, 256], head_dim: [64, 128], causal: [true, false]}
  - {class: flash, versions: [1, 2], dtypes: [fp16, bf16], heads: 4, kv_heads: [4, 1], seq: [100, 256], head_dim: [64, 128], causal: [true, false]}
  - {class: paged_decode, dtypes: [fp16, bf16], batch: 4, heads: 8, kv_heads: 2, head_dim: [64, 128], context: [300], block_size: [8, 16, 32, 64]}
  - {class: gemm, versions: [1, 2], dtypes: [fp16, bf16], m: [1, 77], n: [256], k: [512]}
  - {class: membw_copy, bytes_mib: [1, 64]}
  - {class: membw_read, bytes_mib: [1, 64]}
)";
  const int failed =
      run_measure({.grid = dir / "g.yaml", .backend = "cuda", .out_dir = dir, .quiet = true});
  CHECK(failed == 0);
  for (const Measurement& m : read_measurements(dir / "measurements.csv")) {
    INFO(m.c.describe());
    CHECK(m.timed());
    CHECK(m.check == "pass");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("CUDA backend skips fp32 cases: they calibrate the CPU forward pass only",
          "[gpu][validate]") {
  if (!kvsim::test::gpu_available_or_skip()) return;
  const auto dir = kvsim::test::fresh_dir("kvsim-gpu-fp32");
  // One fp32 and one fp16 GEMM: the fp32 one is recorded as skipped with the reason, untimed;
  // the fp16 one is checked and timed as usual.
  std::ofstream(dir / "g.yaml") << R"(
name: gpu-fp32
timing: {warmup: 1, repetitions: 3}
kernels:
  - {class: gemm, dtypes: [fp32, fp16], m: [1], n: [256], k: [512]}
)";
  const int failed =
      run_measure({.grid = dir / "g.yaml", .backend = "cuda", .out_dir = dir, .quiet = true});
  CHECK(failed == 0);
  const auto rows = read_measurements(dir / "measurements.csv");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].skipped == "fp32 kernels are CPU-only");
  CHECK_FALSE(rows[0].timed());
  CHECK(rows[1].skipped.empty());
  CHECK(rows[1].timed());
  std::filesystem::remove_all(dir);
}
