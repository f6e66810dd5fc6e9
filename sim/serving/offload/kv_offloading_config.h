// engine.kv_offloading: vLLM's KV offloading to CPU memory, named after its flags
// (--kv-offloading-backend, --kv-offloading-size; vllm/config/kv_transfer.py turns them into an
// OffloadingConnector with a CPUOffloadingSpec, vllm/v1/kv_offload/cpu.py):
//   backend              native (vLLM's own connector); the only one modelled
//   size_gib             the CPU buffer, GiB, for the whole replica (split over its TP ranks)
//   block_size_multiple  an offloaded block is this many GPU blocks (CPUOffloadingSpec's
//                        block_size / the GPU block size; default 1)
//   eviction_policy      lru (default) or arc: the CPU tier's manager (vLLM's
//                        kv_connector_extra_config eviction_policy)
//   store_threshold      reuse gating: a block is stored once a lookup walked its key this many
//                        times (0 or 1: every block; vLLM's store_threshold), in a table of
//                        max_tracker_size keys (64,000)
//   disk                 optional: a local-disk tier under the CPU tier, LMCache-style
//                        (LocalDiskBackend): the CPU tier's evicted blocks are written to it, and
//                        a prefix found there is read back at the disk's rate and loaded to the
//                        GPU through host memory. {size_gib, read_gb_per_s (7), write_gb_per_s
//                        (5), latency_us (100)}: the node's disk, shared by the replica's GPUs
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kvsim {

class ConfigNode;
struct ModelSpec;

struct DiskTierConfig {
  double size_gib = 0;
  double read_gb_per_s = 7;  // 1e9 bytes per second (a PCIe 4.0 NVMe drive's sequential read)
  double write_gb_per_s = 5;
  double latency_us = 100;  // per transfer, before its bytes move
};

struct KvOffloadingConfig {
  std::string backend = "native";
  double size_gib = 0;
  int64_t block_size_multiple = 1;
  std::string eviction_policy = "lru";
  int64_t store_threshold = 0;
  int64_t max_tracker_size = 64000;
  std::optional<DiskTierConfig> disk;
};

// nullopt when the engine has no kv_offloading key. ConfigError (file:line:col) for a bad value,
// or a KV store it cannot sit under (paged with enable_prefix_caching).
std::optional<KvOffloadingConfig> parse_kv_offloading(const ConfigNode& engine);
// ConfigError at engine.kv_offloading for a model the tier is not modelled for.
void check_kv_offloading_model(const ConfigNode& engine, const ModelSpec& model);

}  // namespace kvsim
