// The device e2e runs the CPU on: the catalog's placeholder peaks raised to 1.25x the best
// measured rates where they are below them, and the scenario rewritten onto that device.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>
#include <filesystem>
#include <fstream>

#include "core/config_node.h"
#include "models/catalog.h"
#include "sim/config/scenario.h"
#include "validate/replay/e2e_device.h"

using namespace kvsim;
using namespace kvsim::validate;
namespace fs = std::filesystem;

TEST_CASE("e2e device: a peak below 1.25x the best measured rate is raised to it", "[e2e_device]") {
  GpuSpec cpu;
  cpu.name = "cpu-host";
  cpu.fp16_flops = 1e11;       // 100 GFLOP/s placeholder
  cpu.hbm_bytes_per_s = 2e10;  // 20 GB/s placeholder
  // Best GEMM 50 GFLOP/s: 1.25 x 50 = 62.5 G < 100 G, kept. Best copy 100 GB/s: 1.25 x 100 =
  // 125 GB/s > 20 GB/s, raised.
  const DevicePeaks d = raise_peaks(cpu, 5e10, 1e11);
  CHECK(d.raised);
  CHECK(d.gpu.fp16_flops == 1e11);
  CHECK(d.gpu.hbm_bytes_per_s == 1.25e11);
  CHECK(d.gpu.source.rfind("nominal: kvsim-validate e2e", 0) == 0);
  // Both below 1/1.25 of the placeholders (40 G x 1.25 = 50 G, 10 G x 1.25 = 12.5 G): unchanged.
  const DevicePeaks same = raise_peaks(cpu, 4e10, 1e10);
  CHECK_FALSE(same.raised);
  CHECK(same.gpu.hbm_bytes_per_s == 2e10);
}

TEST_CASE("e2e device: bytes/s from the main-memory copies, FLOP/s from every kernel",
          "[e2e_device]") {
  auto copy = [](int64_t mib, double seconds) {
    Measurement m;
    m.c.kind = KernelClass::kMembwCopy;
    m.c.bytes = mib << 20;
    m.reps = 5;
    m.seconds = seconds;
    return m;
  };
  Measurement gemm;
  gemm.c.kind = KernelClass::kGemm;
  gemm.c.gemm = {64, 512, 512};  // 2 x 64 x 512 x 512 = 33,554,432 FLOPs
  gemm.reps = 5;
  gemm.seconds = 33554432 / 5e10;  // 50 GFLOP/s
  // A 1 MiB copy from cache, three times the rate of the 64 MiB one from main memory.
  const std::vector<Measurement> rows = {copy(1, 1e-5), copy(64, 64 * 3e-5), gemm};
  REQUIRE(rows[0].bytes_per_s() == Approx(3 * rows[1].bytes_per_s()));
  const auto [flops, bytes] = best_rates(rows);
  CHECK(flops == Approx(5e10).epsilon(1e-12));
  CHECK(bytes == rows[1].bytes_per_s());
  // No copy of 64 MiB or more: the best rate of any kernel (the cached copy here).
  CHECK(best_rates({rows[0], rows[2]}).second == rows[0].bytes_per_s());
}

TEST_CASE("e2e device: the scenario on the raised device, paths made absolute", "[e2e_device]") {
  // Each case runs in its own process, in parallel with the others: a folder per process.
  const fs::path d =
      fs::temp_directory_path() / ("kvsim_e2e_device_test_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  std::ofstream(d / "t.csv") << "arrival_s,prompt_tokens,output_tokens\n0,10,2\n";
  std::ofstream(d / "s.yaml") << R"(name: dev
model: llama-3-8b
gpu: a100-sxm4-80gb
workload:
  trace: {path: t.csv}
policies: [{name: p, guards: []}]
)";
  const GpuSpec a100 = Catalog::builtin().gpu("a100-sxm4-80gb");
  GpuSpec raised = a100;
  raised.hbm_bytes_per_s = 2.5e12;  // 2,500 GB/s instead of 2,039
  const std::string text = scenario_on_device(ConfigNode::parse_file(d / "s.yaml"), raised);
  const YAML::Node y = YAML::Load(text);
  CHECK(y["workload"]["trace"]["path"].as<std::string>() ==
        (fs::absolute(d) / "t.csv").lexically_normal().string());
  CHECK(y["model"].as<std::string>() == "llama-3-8b");  // a catalog name, not a file: unchanged
  CHECK(y["gpu"]["hbm_gb_per_s"].as<double>() == 2500.0);
  // The inline spec reads back as the same device: memory to the byte, the peaks, the SMs.
  std::ofstream(d / "as_run.yaml") << text;
  const Scenario s = load_scenario_file(d / "as_run.yaml", Catalog::builtin());
  CHECK(s.gpu.name == "a100-sxm4-80gb");
  CHECK(s.gpu.memory_bytes == a100.memory_bytes);
  CHECK(s.gpu.hbm_bytes_per_s == 2.5e12);
  CHECK(s.gpu.fp16_flops == a100.fp16_flops);
  CHECK(s.gpu.sm_count == a100.sm_count);
}
