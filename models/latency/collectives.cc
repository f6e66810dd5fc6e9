#include "models/latency/collectives.h"

#include <algorithm>
#include <cmath>

namespace kvsim {

int64_t default_max_graph_tokens(int64_t max_num_seqs, int64_t max_num_batched_tokens,
                                 int speculative_tokens) {
  const int64_t capture = std::min<int64_t>(max_num_seqs * (1 + speculative_tokens) * 2, 512);
  return std::min(capture, max_num_batched_tokens);
}

Collectives::Collectives(const GpuSpec& gpu, Parallelism par, CollectiveSettings settings,
                         const CollectiveTables& tables)
    : gpu_(gpu.name),
      compute_capability_(gpu.compute_capability),
      nvlink_(gpu.nvlink_bytes_per_s > 0),
      p2p_(settings.p2p == P2pSetting::kAuto ? gpu.p2p : settings.p2p == P2pSetting::kOn),
      par_(par),
      settings_(settings),
      tables_(&tables) {}

bool Collectives::graph(double tokens) const {
  return !settings_.enforce_eager && tokens <= static_cast<double>(settings_.max_graph_tokens);
}

AllReduceCase Collectives::allreduce_case(double bytes) const {
  AllReduceCase c;
  c.compute_capability = compute_capability_;
  // The catalog's NVLink parts sit in NVSwitch systems (HGX, NVL72): every pair connected,
  // multicast available. Without P2P, NVLink is not used either.
  c.nvlink = nvlink_ && p2p_;
  c.nvswitch = c.nvlink;
  c.world = par_.tensor;
  c.p2p = p2p_;
  c.bytes = static_cast<int64_t>(std::llround(bytes));
  c.disable_custom_all_reduce = settings_.disable_custom_all_reduce;
  return c;
}

CollectiveTime Collectives::from_curve(CollectiveOp op, bool graph, int world, bool p2p,
                                       double bytes, CommSource source) const {
  CollectiveTime t;
  t.detail.graph = graph;
  t.detail.message_bytes = bytes;
  t.detail.source = CommSource::kDerived;
  if (const CollectiveCurve* c = tables_->find(gpu_, op, graph, world, p2p)) {
    t.seconds = c->seconds(bytes);
    t.detail.source = source;
  }
  return t;
}

CollectiveTime Collectives::allreduce(double bytes, double tokens) const {
  const bool in_graph = graph(tokens);
  const AllReduceCase actual = allreduce_case(bytes);
  const AllReducePath path = select_allreduce_path(actual);
  // The measured vLLM curves come from hosts with working P2P and vLLM's defaults: they time
  // whatever path vLLM picked there, which is this path when the settings agree.
  AllReduceCase host = actual;
  host.p2p = true;
  host.nvlink = host.nvswitch = nvlink_;
  host.disable_custom_all_reduce = false;
  CollectiveTime t;
  if (!p2p_) {
    t = from_curve(CollectiveOp::kAllReduce, in_graph, par_.tensor, false, bytes,
                   CommSource::kNoP2p);
  } else if (path == select_allreduce_path(host)) {
    t = from_curve(CollectiveOp::kAllReduce, in_graph, par_.tensor, true, bytes,
                   CommSource::kMeasured);
  } else {
    // Custom all-reduce (or symm-mem) turned off: PyNCCL, as nccl-tests times it.
    t = from_curve(CollectiveOp::kNcclAllReduce, false, par_.tensor, true, bytes,
                   CommSource::kNcclTests);
    t.detail.graph = in_graph;
  }
  t.detail.path = path;
  return t;
}

CollectiveTime Collectives::ep_exchange(CollectiveOp op, double total_bytes) const {
  return from_curve(op, false, par_.data, p2p_, total_bytes, CommSource::kNcclTests);
}

CollectiveTime Collectives::pp_send(double bytes) const {
  return from_curve(CollectiveOp::kSendRecv, false, 2, true, bytes, CommSource::kMeasured);
}

CollectiveTime Collectives::tp_all_gather(double total_bytes) const {
  return from_curve(CollectiveOp::kAllGather, false, par_.tensor, p2p_, total_bytes,
                    CommSource::kNcclTests);
}

}  // namespace kvsim
