// Measured collective times (models/catalog/collectives.yaml, written by
// scripts/gen_collectives_catalog.py from ../shared/reference/measured/collectives): per GPU,
// tables of (message bytes, seconds) points by operation, CUDA-graph or eager mode, group size
// and GPU peer-to-peer state, and the rule that reads a time between the points.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kvsim {

class ConfigNode;

enum class CollectiveOp {
  kAllReduce,      // vLLM's TP all-reduce entry point (whatever path that vLLM picked)
  kNcclAllReduce,  // nccl-tests all_reduce
  kAllGather,      // nccl-tests all_gather (bytes: the whole gathered buffer)
  kReduceScatter,  // nccl-tests reduce_scatter (bytes: the whole input buffer)
  kSendRecv,       // NCCL point-to-point send/recv
};

struct CollectiveCurve {
  CollectiveOp op = CollectiveOp::kAllReduce;
  bool graph = false;  // measured replayed in a CUDA graph (else eager)
  int world = 2;
  bool p2p = true;  // false: measured without GPU peer-to-peer access
  std::string source;
  std::vector<std::pair<double, double>> points;  // (bytes, seconds), bytes ascending

  // Seconds for a message of `bytes`: linear in bytes between the two neighbouring points (each
  // segment a latency-plus-bandwidth line through measured points); the smallest point's time
  // below it (the latency floor); the last segment extended above the largest.
  double seconds(double bytes) const;
};

// Every GPU's curves, by catalog key.
class CollectiveTables {
 public:
  // Reads a collectives.yaml. Throws ConfigError naming file:line:col on a bad entry.
  static CollectiveTables load(const std::filesystem::path& file);
  // The shipped models/catalog/collectives.yaml, loaded once.
  static const CollectiveTables& builtin();

  // The curve for `gpu` (catalog key), or nullptr when none was measured.
  const CollectiveCurve* find(const std::string& gpu, CollectiveOp op, bool graph, int world,
                              bool p2p) const;
  size_t gpu_count() const { return curves_.size(); }

 private:
  std::map<std::string, std::vector<CollectiveCurve>> curves_;
};

}  // namespace kvsim
