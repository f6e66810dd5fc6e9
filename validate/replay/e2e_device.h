// The device `kvsim-validate e2e` models on the CPU. The catalog's `cpu-host` has placeholder
// peaks (models/catalog/gpus.yaml); a profile's efficiencies are relative to the peaks and at
// most 1, so a peak below what the machine actually reaches would cap every fit at efficiency 1
// and the model could never be as fast as the machine. Each peak is therefore raised to 1.25x
// the best rate measured (as `kvsim-validate measure` does for a device the catalog lacks) where
// the catalog's figure is below that: FLOP/s over every timed kernel of the calibration grid;
// bytes/s over the copies of at least 64 MiB, main memory's bandwidth (a GPU's HBM peak is its
// DRAM's too): the forward pass streams every layer's weights from main memory while the grid's
// small kernels run from cache, so a cache-speed peak would make the whole model look far too
// fast. Without such copies, bytes/s over every timed kernel. The scenario is then run on that
// device: DIR/scenario.yaml, the scenario with `gpu:` replaced by the inline spec and relative
// trace and model paths made absolute.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "models/gpu_spec.h"
#include "validate/measurements.h"

namespace kvsim::validate {

// A copy at least this large measures main memory, not a cache.
inline constexpr int64_t kMainMemoryCopyBytes = int64_t{64} << 20;

struct DevicePeaks {
  GpuSpec gpu;          // the catalog's entry with the raised peaks
  bool raised = false;  // whether either peak changed
};

// The best FLOP/s and main-memory bytes/s of the timed rows (above).
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
