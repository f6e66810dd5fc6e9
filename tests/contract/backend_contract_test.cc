// The validate backend contract, run over every entry of the backend registry: a backend
// registered in register_backends() gets this suite without anyone editing it.
// How it fails: a backend that cannot measure a one-point-per-class grid, whose outputs fail the
// reference check, or that leaves a case untimed fails the CHECK that says which.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "tests/gpu_skip.h"
#include "validate/backend.h"
#include "validate/commands.h"
#include "validate/measurements.h"

using namespace kvsim;
using namespace kvsim::validate;

namespace {

// One small case of every kernel class.
constexpr const char* kTinyGrid = R"(name: contract-tiny
seed: 1
timing: {warmup: 1, repetitions: 2}
check: {max_flops: 2.0e7, max_bytes: 4194304}
kernels:
  - {class: native, dtypes: [fp16], batch: [1], heads: [2], seq: [16], head_dim: [64], causal: [true]}
  - {class: flash, dtypes: [fp16], batch: [1], heads: [4], kv_heads: [1], seq: [40], head_dim: [64], causal: [true]}
  - {class: paged_decode, dtypes: [fp16], batch: [1], heads: [4], kv_heads: [2], head_dim: [64], context: [64], block_size: [16]}
  - {class: gemm, dtypes: [fp16], m: [8], n: [64], k: [128]}
  - {class: membw_copy, bytes_mib: [0.25]}
  - {class: membw_read, bytes_mib: [0.25]}
)";

std::filesystem::path backend_temp_dir() {
  std::string tmpl =
      (std::filesystem::temp_directory_path() / "kvsim-backend-contract-XXXXXX").string();
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}

void measure_tiny_grid(const std::string& backend) {
  const auto dir = backend_temp_dir();
  std::ofstream(dir / "grid.yaml") << kTinyGrid;
  const int failed =
      run_measure({.grid = dir / "grid.yaml", .backend = backend, .out_dir = dir, .quiet = true});
  CHECK(failed == 0);
  const std::vector<Measurement> rows = read_measurements(dir / "measurements.csv");
  CHECK(rows.size() == 6);
  for (const Measurement& m : rows) {
    CHECK(m.timed());
    CHECK(m.check == "pass");
  }
}

}  // namespace

TEST_CASE("every registered host backend measures a tiny grid with every check passing",
          "[contract][validate]") {
  int ran = 0;
  for (const auto& entry : backend_registry().entries()) {
    if (entry.make.needs_device || !entry.make.built) continue;  // the [gpu] case below
    INFO("backend " << entry.name);
    measure_tiny_grid(entry.name);
    ++ran;
  }
  CHECK(ran >= 1);  // cpu
}

// Device backends: this case is registered only when KVSIM_HAVE_CUDA is defined (a build without
// CUDA has no device backend to test, and Catch2 2.13 has no SKIP). Built with CUDA but run
// without a device, gpu_available_or_skip() prints "gpu test skipped:", which ctest reports as
// "Skipped" (tests/gpu_skip.h), not as a pass; with a device, a backend that fails to start fails.
#ifdef KVSIM_HAVE_CUDA
TEST_CASE("every registered device backend measures a tiny grid with every check passing",
          "[contract][validate][gpu]") {
  if (!kvsim::test::gpu_available_or_skip()) return;
  for (const auto& entry : backend_registry().entries()) {
    if (!entry.make.needs_device || !entry.make.built) continue;
    INFO("backend " << entry.name);
    measure_tiny_grid(entry.name);
  }
}
#endif
