// The kvsim-validate subcommands as library functions (main.cc wires them to CLI11), so the tests
// run the same code the binary does.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/gpu_spec.h"
#include "validate/measurements.h"

namespace kvsim::validate {

struct MeasureOptions {
  std::filesystem::path grid;
  std::string backend = "cpu";
  std::filesystem::path out_dir;
  std::string gpu;     // catalog GPU whose peaks the profile is relative to ("" = from the device)
  bool quiet = false;  // no per-case progress lines
};
// Runs the grid; writes out_dir/measurements.csv and out_dir/manifest.json. Returns the number of
// failed correctness checks (the outputs are written either way).
int run_measure(const MeasureOptions& o);

struct MemprobeOptions {
  std::string backend = "cpu";
  std::filesystem::path out_dir;
  std::string model = "llama-3-8b";             // whose per-layer K/V tensors are allocated
  std::vector<int64_t> tokens = {4096, 16384};  // KV tokens per allocation pattern
};
// Writes out_dir/memprobe.json (and memprobe.csv with the allocation steps on a GPU).
void run_memprobe(const MemprobeOptions& o);

struct CalibrateOptions {
  std::filesystem::path dir;      // a measure output folder
  std::filesystem::path profile;  // where to write the profile YAML
  bool quiet = false;
};
// Fits the profile on the train split; writes the profile and dir/fit_residuals.csv.
void run_calibrate(const CalibrateOptions& o);

struct CompareOptions {
  std::filesystem::path dir;
  std::filesystem::path profile;
  std::filesystem::path out_dir;  // default: dir
  bool quiet = false;
};
// Predicts the test split; writes compare.csv and compare.json; returns the overall MAPE.
double run_compare(const CompareOptions& o);

struct DeviceQueryOptions {
  bool json = false;          // print the JSON instead of one line
  std::filesystem::path out;  // also write the JSON here ("" = no file)
};
// Probes CUDA device 0 and cuBLAS; prints one line (or the JSON). Returns 0 when a CUDA device is
// usable, 1 when not (no device, no driver, or a build without CUDA: the reason is printed).
int run_device_query(const DeviceQueryOptions& o);

struct ImportOptions {
  std::filesystem::path input;  // Vidur's mlp.csv, or the folder holding it
  std::filesystem::path out_dir;
  std::string gpu;  // catalog GPU ("" = guessed from the path: a100, h100, ...)
  int64_t tp = 1;   // which num_tensor_parallel_workers rows to import
  bool quiet = false;
};
// Converts Vidur's profiling CSV into out_dir/measurements.csv + manifest.json (+ vidur_ops.csv,
// which row came from which Vidur operation and token count). Returns the number of rows.
int run_import_vidur(const ImportOptions& o);

// The GPU spec a measure run is relative to, as recorded in its manifest.json.
GpuSpec manifest_gpu(const std::filesystem::path& dir);

}  // namespace kvsim::validate
