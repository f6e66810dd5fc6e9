#include "models/latency/costing.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

namespace kvsim {

namespace {

// The router's outputs as vLLM's fused top-k writes them (fused_topk: FP32 weights, INT32 ids).
constexpr double kTopkWeightBytes = 4.0;
constexpr double kTopkIdBytes = 4.0;

// Output tile shapes (rows x columns) of the GEMM kernels cuBLAS and CUTLASS pick among for
// FP16 on Ampere and Hopper (CUTLASS's default threadblock shapes), then the 16-row tiles of the
// skinny kernels that batch-1 decode with quantized weights uses (Marlin and AWQ's GEMV-like
// kernels: one m16 tensor-core fragment of rows).
constexpr std::pair<int64_t, int64_t> kTiles[] = {{64, 64},  {128, 64}, {64, 128},  {128, 128},
                                                  {256, 64}, {64, 256}, {256, 128}, {128, 256},
                                                  {16, 128}, {16, 256}};

// Each tile shape's time relative to the full-wave efficiency: 1 / (I/(I + h) (64 + h)/64),
// never faster than peak (profile.h, gemm_tile_half_intensity). Computed where a tile search
// runs (a GEMM memo miss), not with every Costing.
std::array<double, std::size(kTiles)> tile_slowdown(const Profile& p) {
  std::array<double, std::size(kTiles)> slowdown{};
  const double h = p.gemm_tile_half_intensity;
  const double floor = p.of(OpClass::kGemm).compute_efficiency;
  for (size_t i = 0; i < std::size(kTiles); ++i) {
    const auto [tm, tn] = kTiles[i];
    const double intensity = static_cast<double>(tm * tn) / static_cast<double>(tm + tn);
    slowdown[i] = std::max(floor, 64.0 * (intensity + h) / (intensity * (64 + h)));
  }
  return slowdown;
}

}  // namespace

OpCost Costing::gemm(std::string_view name, double m, double k, double n, double weight_elems,
                     double reps, int memo_id, Weights kind) const {
  const double flops = 2.0 * m * k * n;
  const double wb = kind == Weights::kLinear ? s_.wb : kind == Weights::kExperts ? s_.xwb : s_.ewb;
  const double bytes = weight_elems * wb + m * k * kActBytes + m * n * kActBytes;
  const double scale = kind == Weights::kLinear    ? s_.gemm_flops_scale
                       : kind == Weights::kExperts ? s_.expert_flops_scale
                                                   : 1.0;
  const Rates r = rates(OpClass::kGemm, m, 1.0, 1.0, scale);
  OpCost o = op(name, OpClass::kGemm, flops, bytes, 1, reps, r);
  if (ideal_ || g_.sm_count <= 0 || p_.table(OpClass::kGemm, TableMetric::kComputeEfficiency)) {
    return o;  // no SM count (an inline GPU spec) or a measured table: the roofline
  }
  GemmMemo* slot = nullptr;
  if (memo_ != nullptr && memo_id >= 0 && m <= static_cast<double>(kGemmMemoMaxRows)) {
    Memo& v = *memo_;
    const auto row = static_cast<size_t>(m);
    if (row >= v.size()) v.resize(std::min(kGemmMemoMaxRows, std::max(2 * row, size_t{256})) + 1);
    slot = &v[row][static_cast<size_t>(memo_id)];
    if (slot->seconds >= 0) {
      o.compute_s = slot->compute_s * reps;
      o.memory_s = slot->memory_s * reps;
      o.seconds = slot->seconds * reps + o.overhead_s;
      o.bound = slot->compute_s >= slot->memory_s ? Bound::kCompute : Bound::kMemory;
      return o;
    }
  }
  const double sms = g_.sm_count;
  // Seconds of one tile-k-slice FLOP on one SM at the class's full-wave efficiency.
  const double sm_s_per_flop = sms / r.flops_per_s;
  const double mem1 = bytes / r.bytes_per_s;
  // Tile counts in integers (m and n are whole rows and columns): the divisions by the
  // constant tile sides compile to shifts.
  const auto mi = static_cast<int64_t>(m);
  const auto ni = static_cast<int64_t>(n);
  const auto si = static_cast<int64_t>(sms);
  const double inv_sms = 1.0 / sms;
  const double q = p_.gemm_combine_exponent;
  const std::array<double, std::size(kTiles)> slowdown = tile_slowdown(p_);
  double best = -1, best_c = 0, best_m = 0;
  for (size_t i = 0; i < std::size(kTiles); ++i) {
    const auto [tm, tn] = kTiles[i];
    const int64_t tiles = ((mi + tm - 1) / tm) * ((ni + tn - 1) / tn);
    const double tile_s = 2.0 * tm * tn * k * sm_s_per_flop * slowdown[i];  // one tile
    for (int64_t split = 1; split <= 8; split *= 2) {
      if (split > 1 && tiles * split > si) break;
      // ceil(tiles x split / SMs) without a 64-bit division per candidate.
      const int64_t work = tiles * split;
      auto waves = static_cast<int64_t>(static_cast<double>(work) * inv_sms);
      while (waves * si < work) ++waves;
      while (waves > 0 && (waves - 1) * si >= work) --waves;
      const double c = static_cast<double>(waves) * tile_s / static_cast<double>(split);
      // Split-K writes and reads back FP32 partial sums of the whole output.
      const double mem = split > 1 ? mem1 + 8.0 * m * n * split / r.bytes_per_s : mem1;
      // The candidate of least combined time (below); comparing c^q + mem^q is enough.
      const double t = q == 3.0 ? c * c * c + mem * mem * mem : std::pow(c, q) + std::pow(mem, q);
      if (best < 0 || t < best) {
        best = t;
        best_c = c;
        best_m = mem;
      }
    }
  }
  const double hi = std::max(best_c, best_m);
  const double x = std::min(best_c, best_m) / hi;
  // (c^q + m^q)^(1/q) = hi (1 + x^q)^(1/q), x = lo/hi: no overflow, exact for lo = 0; q = 3
  // (the built-in profiles) without pow, which the engine would pay every iteration.
  const double one =
      q == 3.0 ? hi * std::cbrt(1.0 + x * x * x) : hi * std::pow(1.0 + std::pow(x, q), 1.0 / q);
  if (slot != nullptr) *slot = {best_c, best_m, one};
  o.compute_s = best_c * reps;
  o.memory_s = best_m * reps;
  o.seconds = one * reps + o.overhead_s;
  o.bound = best_c >= best_m ? Bound::kCompute : Bound::kMemory;
  return o;
}

double elementwise_latency_s(const Profile& p, const GpuSpec& g, double ctas, double serial_loads) {
  const double waves = g.sm_count > 0 ? ctas / g.sm_count : 0.0;
  return waves * p.elementwise_cta_s + serial_loads * p.elementwise_serial_load_s;
}

OpCost Costing::elementwise(std::string_view name, std::initializer_list<double> kernel_bytes,
                            double flops, double reps, double m,
                            std::initializer_list<double> kernel_ctas, double serial_loads) const {
  const Rates r = rates(OpClass::kElementwise, m);
  double bytes = 0;
  double one = 0;
  const double floor = ideal_ ? 0.0 : p_.elementwise_floor_s;
  // Bytes that fit in L2 (the previous kernel's output is still there) move at the L2 rate, the
  // profile's speedup over the HBM rate; the rest at the HBM rate. Speedup 1: every byte at HBM.
  const double speedup = ideal_ ? 1.0 : p_.elementwise_l2_speedup;
  const double l2 = speedup != 1.0 ? static_cast<double>(g_.l2_bytes) : 0.0;
  const double* ctas = kernel_ctas.begin();
  for (double b : kernel_bytes) {
    bytes += b;
    const double in_l2 = std::min(b, l2);
    const double n_ctas = ctas != kernel_ctas.end() ? *ctas++ : 0.0;
    const double latency = ideal_ ? 0.0 : elementwise_latency_s(p_, g_, n_ctas, serial_loads);
    one +=
        std::max(floor + latency, in_l2 / (r.bytes_per_s * speedup) + (b - in_l2) / r.bytes_per_s);
  }
  OpCost o = op(name, OpClass::kElementwise, flops, bytes, static_cast<double>(kernel_bytes.size()),
                reps, r);
  o.seconds = std::max(o.compute_s, one * reps) + o.overhead_s;
  return o;
}

Rates Costing::link_rates(double m) const {
  Rates r = rates(OpClass::kAllReduce, m);
  if (!ideal_ && comm_ != nullptr && !comm_->p2p() && g_.nvlink_bytes_per_s > 0) {
    r.bytes_per_s *= g_.pcie_bytes_per_s / peak_bytes(OpClass::kAllReduce);  // no P2P: no NVLink
  }
  r.launch_s += ideal_ ? 0.0 : p_.allreduce_latency_s;
  return r;
}

OpCost Costing::collective(std::string_view name, double traffic, double per_call_s, double calls,
                           const CommDetail& detail) {
  OpCost o;
  o.name = name;
  o.op_class = OpClass::kAllReduce;
  o.bytes = traffic * calls;
  o.memory_s = per_call_s * calls;
  o.seconds = o.memory_s;
  o.bound = Bound::kMemory;
  o.comm = detail;
  o.comm.calls = calls;
  return o;
}

// All-reduce of m x hidden activations, twice per layer (after O and after the MLP).
OpCost Costing::allreduce(double m) const {
  const double payload = m * s_.hidden * kActBytes;
  const double traffic = 2.0 * (s_.tp - 1) / s_.tp * payload;  // ring: send and receive
  const double calls = 2 * s_.layers;
  CollectiveTime t;
  if (!ideal_ && comm_ != nullptr) t = comm_->allreduce(payload, m);
  if (t.seconds >= 0) return collective("allreduce", traffic, t.seconds, calls, t.detail);
  OpCost o = op("allreduce", OpClass::kAllReduce, 0.0, traffic, 1, calls, link_rates(m));
  if (!ideal_ && comm_ != nullptr) o.comm = t.detail;
  o.comm.calls = calls;
  return o;
}

OpCost Costing::all_to_all(double m, double gathered) const {
  // AgRsAll2AllManager (vllm/distributed/device_communicators/all2all.py): the naive DP/EP
  // prepare (MoEPrepareAndFinalizeNaiveDPEPModular.prepare -> dispatch) all-gathers every rank's
  // hidden states with its routing, top-k FP32 weights and INT32 expert ids a row, in one grouped
  // all_gatherv with the sizes DPMetadata gives; the combine reduce-scatters the output rows.
  const double d = s_.moe_token_scale;  // the data-parallel ranks whose tokens meet
  const double routing_bytes = s_.topk * (kTopkWeightBytes + kTopkIdBytes);
  const double dispatched = gathered * (s_.hidden * kActBytes + routing_bytes);
  const double combined = gathered * s_.hidden * kActBytes;
  // Each rank receives the others' (d - 1) / d of the gathered rows and sends as much back.
  const double traffic = (dispatched + combined) * (d - 1) / d;
  if (!ideal_ && comm_ != nullptr) {
    const CollectiveTime gather = comm_->ep_exchange(CollectiveOp::kAllGather, dispatched, m);
    const CollectiveTime scatter = comm_->ep_exchange(CollectiveOp::kReduceScatter, combined, m);
    if (gather.seconds >= 0 && scatter.seconds >= 0) {
      return collective("all_to_all", traffic, gather.seconds + scatter.seconds, s_.moe_layers,
                        gather.detail);
    }
  }
  OpCost o = op("all_to_all", OpClass::kAllReduce, 0.0, traffic, 2, s_.moe_layers, link_rates(m));
  if (!ideal_ && comm_ != nullptr)
    o.comm = {CommSource::kDerived, AllReducePath::kNccl, false, dispatched, 0};
  o.comm.calls = s_.moe_layers;
  return o;
}

OpCost Costing::pipeline_send(double m) const {
  const double payload = m * s_.hidden * kActBytes;
  const double boundaries = s_.pp - 1;
  if (!ideal_ && comm_ != nullptr) {
    const double slice = payload / s_.tp;  // one tensor's slice from each TP rank
    const CollectiveTime send = comm_->pp_send(slice);
    const CollectiveTime gather = s_.tp > 1 ? comm_->tp_all_gather(payload) : CollectiveTime{0, {}};
    if (send.seconds >= 0 && gather.seconds >= 0) {
      // Two tensors (hidden states and residual), each sent then gathered.
      return collective("pp_send", 2 * slice, 2 * (send.seconds + gather.seconds), boundaries,
                        send.detail);
    }
  }
  OpCost o = op("pp_send", OpClass::kAllReduce, 0.0, payload, 1, boundaries, link_rates(m));
  if (!ideal_ && comm_ != nullptr)
    o.comm = {CommSource::kDerived, AllReducePath::kNccl, false, payload, 0};
  o.comm.calls = boundaries;
  return o;
}

}  // namespace kvsim
