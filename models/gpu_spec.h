// What a GPU is, as far as memory and latency are concerned.
#pragma once

#include <cstdint>
#include <string>

namespace kvsim {

class ConfigNode;

struct GpuSpec {
  std::string name;          // catalog key, e.g. "a100-sxm4-80gb"
  std::string display_name;  // e.g. "NVIDIA A100-SXM4-80GB"
  std::string source;
  double marketed_gb = 0;             // the figure in the product name ("80 GB")
  int64_t memory_bytes = 0;           // total that cudaMemGetInfo reports: the simulated capacity
  int64_t context_reserve_bytes = 0;  // CUDA context, outside every allocator
  double hbm_bytes_per_s = 0;         // peak memory bandwidth
  double fp16_flops = 0;              // dense FP16/BF16 tensor-core peak
  double fp8_flops = 0;               // dense FP8 tensor-core peak; 0 when the part has none
  double fp4_flops = 0;               // dense FP4 tensor-core peak; 0 when the part has none
  // CUDA compute capability as major * 10 + minor (80 Ampere A100, 89 Ada, 90 Hopper, 100
  // Blackwell data centre, 120 Blackwell RTX); 0 = not given (kernel choice then goes by name).
  int compute_capability = 0;
  int sm_count = 0;
  int64_t l2_bytes = 0;
  double pcie_bytes_per_s = 0;    // host link, one direction (swap traffic)
  double nvlink_bytes_per_s = 0;  // 0 when the part has none (all-reduce falls back to PCIe)
  // CUDA peer-to-peer access between two such GPUs in one host (vLLM's custom all-reduce needs
  // it; GeForce drivers refuse it). An engine's `p2p: on|off` overrides it.
  bool p2p = true;
  // What one GPU costs per hour (capacity search, docs/capacity.md): 0 = unknown. The catalog's
  // price_source says where the figure comes from or that it is an assumption.
  double gpu_hour_usd = 0;
  std::string price_source;
};

// Reads a GPU from a catalog entry or an inline scenario spec. Throws ConfigError.
GpuSpec parse_gpu_spec(const ConfigNode& node, const std::string& name);

}  // namespace kvsim
