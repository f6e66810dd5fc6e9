// The device `kvsim-validate e2e` models on the CPU. The catalog's `cpu-host` has placeholder
// peaks (models/catalog/gpus.yaml); a profile's efficiencies are relative to the peaks and at
// most 1, so a peak below what the kernels actually reach here would cap every fit at efficiency
// 1 and the model could never be as fast as the machine. Each peak is therefore raised to 1.25x
// the best rate any timed kernel of the calibration grid reached (as `kvsim-validate measure`
// does for a device the catalog lacks) where the catalog's figure is below that, and the
// scenario is run on that device: DIR/scenario.yaml, the scenario with `gpu:` replaced by the
// inline spec and relative trace and model paths made absolute.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "models/gpu_spec.h"
#include "validate/measurements.h"

namespace kvsim::validate {

struct DevicePeaks {
  GpuSpec gpu;          // the catalog's entry with the raised peaks
  bool raised = false;  // whether either peak changed
};

// The best FLOP/s and bytes/s over the timed rows.
std::pair<double, double> best_rates(const std::vector<Measurement>& rows);

// `catalog` with fp16_flops = max(catalog, 1.25 x best_flops) and hbm_bytes_per_s =
// max(catalog, 1.25 x best_bytes); its source says so when raised.
DevicePeaks raise_peaks(const GpuSpec& catalog, double best_flops, double best_bytes);

// The inline GPU spec (the map resolve_gpu reads) of `g`.
YAML::Node gpu_spec_yaml(const GpuSpec& g);

// The scenario `raw` (read from its file) with `gpu:` = gpu_spec_yaml(gpu), and workload.trace.path
// and a `model:` naming a file made absolute against the scenario's folder, as YAML text.
std::string scenario_on_device(const ConfigNode& raw, const GpuSpec& gpu);

}  // namespace kvsim::validate
