#include "validate/replay/e2e_device.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvsim::validate {

std::pair<double, double> best_rates(const std::vector<Measurement>& rows) {
  double flops = 0, bytes = 0, dram = 0;
  for (const Measurement& m : rows) {
    flops = std::max(flops, m.flop_per_s());
    bytes = std::max(bytes, m.bytes_per_s());
    if (m.c.kind == KernelClass::kMembwCopy && m.c.bytes >= kMainMemoryCopyBytes) {
      dram = std::max(dram, m.bytes_per_s());
    }
  }
  return {flops, dram > 0 ? dram : bytes};
}

DevicePeaks raise_peaks(const GpuSpec& catalog, double best_flops, double best_bytes) {
  DevicePeaks d{catalog, false};
  if (1.25 * best_flops > catalog.fp16_flops) {
    d.gpu.fp16_flops = 1.25 * best_flops;
    d.raised = true;
  }
  if (1.25 * best_bytes > catalog.hbm_bytes_per_s) {
    d.gpu.hbm_bytes_per_s = 1.25 * best_bytes;
    d.raised = true;
  }
  if (d.raised) {
    d.gpu.source = fmt::format(
        "nominal: kvsim-validate e2e raised the catalog's {} peaks to 1.25 x the best rates its "
        "calibration grid measured ({:.6g} FLOP/s, {:.6g} B/s; catalog {:.6g}, {:.6g})",
        catalog.name, d.gpu.fp16_flops, d.gpu.hbm_bytes_per_s, catalog.fp16_flops,
        catalog.hbm_bytes_per_s);
  }
  return d;
}

YAML::Node gpu_spec_yaml(const GpuSpec& g) {
  YAML::Node n(YAML::NodeType::Map);
  n["name"] = g.name;
  n["display_name"] = g.display_name;
  n["source"] = g.source;
  n["memory_bytes"] = g.memory_bytes;
  n["context_reserve_gib"] = static_cast<double>(g.context_reserve_bytes) / (1 << 30);
  n["hbm_gb_per_s"] = g.hbm_bytes_per_s / 1e9;
  n["fp16_tflops"] = g.fp16_flops / 1e12;
  n["fp8_tflops"] = g.fp8_flops / 1e12;
  n["sm_count"] = g.sm_count;
  n["l2_mib"] = static_cast<double>(g.l2_bytes) / (1 << 20);
  n["pcie_gb_per_s"] = g.pcie_bytes_per_s / 1e9;
  n["nvlink_gb_per_s"] = g.nvlink_bytes_per_s / 1e9;
  n["gpu_hour_usd"] = g.gpu_hour_usd;
  n["price_source"] = g.price_source;
  return n;
}

std::string scenario_on_device(const ConfigNode& raw, const GpuSpec& gpu) {
  YAML::Node root = YAML::Clone(raw.yaml());
  const std::filesystem::path dir = std::filesystem::absolute(raw.source()).parent_path();
  root["gpu"] = gpu_spec_yaml(gpu);
  auto absolute = [&](YAML::Node n) {
    if (!n || !n.IsScalar()) return false;
    const std::filesystem::path p = n.as<std::string>();
    if (p.is_relative() && std::filesystem::exists(dir / p)) {
      n = (dir / p).lexically_normal().string();
      return true;
    }
    return false;
  };
  if (root["model"]) absolute(root["model"]);
  if (root["workload"] && root["workload"].IsMap() && root["workload"]["trace"] &&
      root["workload"]["trace"].IsMap()) {
    absolute(root["workload"]["trace"]["path"]);
  }
  YAML::Emitter out;
  out.SetMapFormat(YAML::Block);
  out << root;
  return std::string("# kvsim-validate e2e: ") + raw.source() + " on the calibrated device\n" +
         out.c_str() + "\n";
}

}  // namespace kvsim::validate
