#include "models/gpu_spec.h"

#include <cmath>

#include "core/config_node.h"
#include "core/units.h"

namespace kvsim {

GpuSpec parse_gpu_spec(const ConfigNode& n, const std::string& name) {
  if (!n.is_map()) n.fail_expected("a GPU spec (a map)");
  GpuSpec g;
  g.name = name;
  g.display_name = n.get<std::string>("display_name", name);
  g.source = n.get<std::string>("source", "inline");
  // Capacity: exact bytes, or GiB as tools print it, or decimal GB as datasheets print it.
  const Bounds cap{.min = 1e-3, .max = 1e5};
  if (n.has("memory_bytes")) {
    g.memory_bytes = n.get<int64_t>("memory_bytes", {.min = 1e6, .max = 1e14});
  } else if (n.has("memory_gib")) {
    g.memory_bytes = gib_to_bytes(n.get<double>("memory_gib", cap));
  } else {
    g.memory_bytes = gb_to_bytes(n.get<double>("memory_gb", cap));
  }
  g.marketed_gb = n.get<double>("marketed_gb", to_gb(g.memory_bytes), {.min = 0, .max = 1e5});
  g.context_reserve_bytes = gib_to_bytes(
      n.get<double>("context_reserve_gib", 0.0, {.min = 0, .max = to_gib(g.memory_bytes)}));
  g.hbm_bytes_per_s = n.get<double>("hbm_gb_per_s", {.min = 1, .max = 1e6}) * 1e9;
  g.fp16_flops = n.get<double>("fp16_tflops", {.min = 0.1, .max = 1e6}) * 1e12;
  g.fp8_flops = n.get<double>("fp8_tflops", 0.0, {.min = 0, .max = 1e6}) * 1e12;
  g.fp4_flops = n.get<double>("fp4_tflops", 0.0, {.min = 0, .max = 1e6}) * 1e12;
  if (n.has("compute_capability")) {
    // "9.0" or 9.0 in the file, as nvidia-smi and the CUDA docs print it.
    const double cc = n.get<double>("compute_capability", {.min = 1.0, .max = 99.9});
    g.compute_capability = static_cast<int>(std::lround(cc * 10));
  }
  g.sm_count = n.get<int>("sm_count", 0, {.min = 0, .max = 100000});
  g.l2_bytes = gib_to_bytes(n.get<double>("l2_mib", 0.0, {.min = 0, .max = 1e6}) / 1024.0);
  g.pcie_bytes_per_s = n.get<double>("pcie_gb_per_s", 25.0, {.min = 0.1, .max = 1e5}) * 1e9;
  g.nvlink_bytes_per_s = n.get<double>("nvlink_gb_per_s", 0.0, {.min = 0, .max = 1e6}) * 1e9;
  g.p2p = n.get<bool>("p2p", true);
  g.gpu_hour_usd = n.get<double>("gpu_hour_usd", 0.0, {.min = 0, .max = 1e6});
  g.price_source = n.get<std::string>("price_source", "");
  n.get<std::string>("notes", "");
  return g;
}

}  // namespace kvsim
