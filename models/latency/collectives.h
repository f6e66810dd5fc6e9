// The collectives of a forward pass as vLLM runs them (docs/latency.md "Collectives"): which
// path a tensor-parallel all-reduce takes, whether it runs inside a CUDA graph, the message of
// each collective, and its time from the GPU's measured curve (collective_curve.h). Costing
// turns these into operations; where no curve fits, Costing keeps its derived link formula.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "models/gpu_spec.h"
#include "models/latency/collective_curve.h"
#include "models/latency/collective_path.h"
#include "models/parallelism.h"

namespace kvsim {

// GPU peer-to-peer access: the catalog's `p2p` for the GPU (auto), or forced.
enum class P2pSetting { kAuto, kOn, kOff };

// The engine settings that change how collectives run.
struct CollectiveSettings {
  P2pSetting p2p = P2pSetting::kAuto;
  bool disable_custom_all_reduce = false;  // vLLM --disable-custom-all-reduce
  bool enforce_eager = false;              // vLLM --enforce-eager: no CUDA graphs
  // Batches of at most this many tokens run in a CUDA graph (vLLM's max_cudagraph_capture_size).
  int64_t max_graph_tokens = 512;
  // vLLM V0 (below 0.8): only decode-only batches replay a CUDA graph; a batch with a prefill
  // runs eagerly whatever its size (ModelInputForGPUBuilder._use_captured_graph).
  bool graph_decode_only = false;
};

// vLLM V0's largest captured batch (vllm/worker/model_runner.py, _get_max_graph_batch_size):
// max_num_seqs rounded up to a multiple of 8, at most 256 (_BATCH_SIZES_TO_CAPTURE).
int64_t v0_max_graph_tokens(int64_t max_num_seqs);

// vLLM's default max_cudagraph_capture_size (VllmConfig._set_cudagraph_sizes):
// min(max_num_seqs x (1 + speculative tokens) x 2, 512), then at most max_num_batched_tokens.
int64_t default_max_graph_tokens(int64_t max_num_seqs, int64_t max_num_batched_tokens,
                                 int speculative_tokens = 0);

// One collective call's time and how it was found (seconds < 0: no curve, derive it).
struct CollectiveTime {
  double seconds = -1;
  CommDetail detail;
};

class Collectives {
 public:
  // Requires: `tables` outlives this object.
  Collectives(const GpuSpec& gpu, Parallelism par, CollectiveSettings settings,
              const CollectiveTables& tables);

  // Whether a forward pass of `tokens` rows replays a CUDA graph: vLLM V1 captures full graphs
  // for uniform decode and piecewise graphs for the rest up to the capture size, and the
  // all-reduce sits inside the captured pieces (attention alone runs between them).
  bool graph(double tokens) const;
  bool p2p() const { return p2p_; }

  // The tensor-parallel all-reduce of `bytes` (per call) for a batch of `tokens` rows.
  CollectiveTime allreduce(double bytes, double tokens) const;
  // The all-reduce path facts for a message (exposed for tests and the breakdown).
  AllReduceCase allreduce_case(double bytes) const;
  // vLLM's default EP all2all backend (allgather_reducescatter): the dispatch all-gather and the
  // combine reduce-scatter over the d data-parallel ranks, each of `total_bytes` (the whole
  // gathered buffer, nccl-tests' size), in a forward of `tokens` rows on this rank. `op`:
  // kAllGather or kReduceScatter. Where the host kind has no such curve (none was measured
  // without P2P), the NCCL all-reduce of half the bytes on the same host kind: a ring all-gather
  // or reduce-scatter of S bytes moves (w - 1) / w x S through each rank in one kernel, as the
  // ring all-reduce of S / 2 does (2 (w - 1) / w x S / 2).
  CollectiveTime ep_exchange(CollectiveOp op, double total_bytes, double tokens) const;
  // One pipeline-stage send of `bytes` over PyNCCL.
  CollectiveTime pp_send(double bytes) const;
  // The all-gather over the tensor-parallel group that rebuilds a TP-sliced PP send.
  CollectiveTime tp_all_gather(double total_bytes) const;

 private:
  CollectiveTime from_curve(CollectiveOp op, bool graph, int world, bool p2p, double bytes,
                            CommSource source) const;

  std::string gpu_;
  int compute_capability_;
  bool nvlink_;
  bool p2p_;
  Parallelism par_;
  CollectiveSettings settings_;
  const CollectiveTables* tables_;
};

}  // namespace kvsim
