// The latency model's per-operation costing (Costing): the rates an operation class runs at
// under a profile, and the cost of each kind of operation of a forward pass (GEMMs by their
// tiling, elementwise kernels, prefill and decode attention, collectives), summed over layers.
// Internal to models/latency: LatencyModel assembles an iteration from these operations.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "models/attention_kind.h"
#include "models/gpu_spec.h"
#include "models/latency/collectives.h"
#include "models/latency/latency_model.h"
#include "models/latency/latency_shape.h"
#include "models/latency/profile.h"

namespace kvsim {

// The rates one operation runs at.
struct Rates {
  double flops_per_s;
  double bytes_per_s;
  double launch_s;
};

// A batch's row counts (doubles, as the costing uses them), checked.
struct BatchRows {
  double m;     // rows through the linear layers
  double emit;  // rows through the LM head
  double n;     // decode sequences
  double t;     // total decode context (attended tokens)
};
BatchRows batch_rows(const BatchShape& batch, const ModelSpec& model);

// Row counts LatencyModel's GEMM memo keeps (larger batches are costed afresh): grown as batches
// of more rows appear, at most 6 x 24 B x 16k.
inline constexpr size_t kGemmMemoMaxRows = size_t{1} << 14;

// Decode attention for n sequences with contexts summing to t: seconds = a + b t (see header).
// The terms that depend on n and the block size only (Costing::decode_terms).
struct DecodeTerms {
  Rates r;
  double kv_per_token;     // bytes per context token per layer
  double flops_per_token;  // per layer
  double qo_bytes;         // per layer: the queries read and outputs written
  double floor_tokens;     // the latency floor, in tokens of KV
  double slope;            // seconds per context token per layer (the per-token roofline)
  double fixed;            // seconds per layer that do not grow with t (per-sequence reads)
  double flops_fixed;      // per layer: FLOPs that do not grow with t (MLA's absorption)
};

// Decode attention's totals at total context t (the profile's, not the lower bound's): what an
// iteration's totals add up. decode_attention_at() takes its figures from here, and the
// decode-step memo calls it alone (no per-op record, none of its divisions).
struct DecodeAttentionTotals {
  double seconds, flops, bytes;
};
inline DecodeAttentionTotals decode_attention_totals(const DecodeTerms& d, double n, double t,
                                                     double layers) {
  DecodeAttentionTotals a;
  a.flops = (d.flops_per_token * t + d.flops_fixed) * layers;
  a.bytes = (d.kv_per_token * t + d.qo_bytes) * layers;
  const double overhead = (n > 0 ? d.r.launch_s : 0.0) * layers;
  // Affine in t: the per-token roofline, plus per-sequence costs that do not grow with t.
  a.seconds = (d.slope * t + d.fixed) * layers + overhead;
  return a;
}

// Decode attention's terms in a batch that also holds prefill chunks (the profile's factor on the
// per-token time; the lower bound keeps the decode-only roofline).
inline DecodeTerms mixed_terms(DecodeTerms d, const Profile& p, bool ideal) {
  if (!ideal) d.slope *= p.mixed_decode_slope_factor;
  return d;
}

// Decode attention's cost at total context t from its terms: the one formula both the full
// costing and the decode-step memo (LatencyModel::DecodeStepMemo) use, so they give the same bits.
OpCost decode_attention_at(const DecodeTerms& d, double n, double t, double layers, bool ideal);

// Adds `from`'s FLOPs, bytes and times to `into` (name, class and bound unchanged).
inline void accumulate(OpCost& into, const OpCost& from) {
  into.flops += from.flops;
  into.bytes += from.bytes;
  into.compute_s += from.compute_s;
  into.memory_s += from.memory_s;
  into.overhead_s += from.overhead_s;
  into.seconds += from.seconds;
}

// Two operations reported as one named `name` (e.g. a MoE layer's shared experts: their gate/up
// and down GEMMs): FLOPs, bytes and times add.
inline OpCost merged(std::string_view name, const OpCost& a, const OpCost& b) {
  OpCost o = a;
  o.name = name;
  accumulate(o, b);
  o.bound = o.compute_s >= o.memory_s ? Bound::kCompute : Bound::kMemory;
  return o;
}

// Which weights a GEMM reads: a decoder linear layer's (weight_dtype), the routed experts'
// (their own type when they have one) or 16-bit ones (router, LM head).
enum class Weights { kLinear, kExperts, kUnquantized };

// PyTorch's index_select (the embedding gather, aten/src/ATen/native/cuda/Indexing.cu
// index_select_out_cuda_impl) runs its small-index kernel at up to this many indices: each
// thread then loops over every index, one dependent load after another.
inline constexpr double kIndexSelectSmallIndices = 16;

// An elementwise kernel's latency beside its bytes: `ctas` CTAs spread over the SMs at the
// profile's seconds per CTA, and `serial_loads` dependent loads one after another.
double elementwise_latency_s(const Profile& p, const GpuSpec& g, double ctas, double serial_loads);

class Costing {
 public:
  using Memo = std::vector<std::array<GemmMemo, 6>>;  // by row count, then memo id
  // `comm`: the measured collectives (nullptr: every collective from the derived link formula).
  Costing(const LatencyShape& s, const GpuSpec& g, const Profile& p, bool ideal,
          Memo* memo = nullptr, const Collectives* comm = nullptr)
      : s_(s), g_(g), p_(p), ideal_(ideal), memo_(memo), comm_(comm) {}

  // The profile's tables of a class (nullptr: none).
  struct ClassTables {
    const EfficiencyTable* compute;
    const EfficiencyTable* memory;
  };
  ClassTables tables(OpClass c) const {
    return {p_.table(c, TableMetric::kComputeEfficiency),
            p_.table(c, TableMetric::kMemoryEfficiency)};
  }

  // Rates of `c` for a table axis value `x` (ignored where the class has no table).
  Rates rates(OpClass c, double x, double compute_curve = 1.0, double memory_curve = 1.0,
              double flops_scale = 1.0) const {
    if (ideal_) return {g_.fp16_flops * flops_scale, peak_bytes(c), 0.0};
    return rates(c, tables(c), x, compute_curve, memory_curve, flops_scale);
  }
  // The same with the class's tables looked up already (a loop's).
  Rates rates(OpClass c, const ClassTables& t, double x, double compute_curve = 1.0,
              double memory_curve = 1.0, double flops_scale = 1.0) const {
    const double peak_flops = g_.fp16_flops * flops_scale;
    if (ideal_) return {peak_flops, peak_bytes(c), 0.0};
    const ClassParams& cp = p_.of(c);
    const double ce = t.compute ? t.compute->at(x) : cp.compute_efficiency * compute_curve;
    const double me = t.memory ? t.memory->at(x) : cp.memory_efficiency * memory_curve;
    return {peak_flops * ce, peak_bytes(c) * me, cp.launch_overhead_s};
  }

  // One operation run `reps` times (once per layer), `kernels` launches each time.
  static OpCost op(std::string_view name, OpClass c, double flops, double bytes, double kernels,
                   double reps, const Rates& r) {
    OpCost o;
    o.name = name;
    o.op_class = c;
    o.flops = flops * reps;
    o.bytes = bytes * reps;
    o.compute_s = o.flops / r.flops_per_s;
    o.memory_s = o.bytes / r.bytes_per_s;
    o.overhead_s = kernels * r.launch_s * reps;
    o.seconds = std::max(o.compute_s, o.memory_s) + o.overhead_s;
    o.bound = o.compute_s >= o.memory_s ? Bound::kCompute : Bound::kMemory;
    return o;
  }

  // A GEMM of m rows, k inputs, n outputs (per GPU), weights read once; `kind` says whose
  // weights (their bytes per weight and the peak their GEMMs run at). Costed from its tiling
  // (docs/latency.md "GEMMs: tiles and waves"): the output is cut into tiles of one of the
  // kernels' tile shapes, optionally split along k (split-K) while that still fits one wave;
  // the tiles run in waves of one tile per SM, each wave taking a whole tile's compute time
  // however few tiles it holds. Compute and memory combine smoothly, and like cuBLAS's
  // heuristics (which pick the fastest kernel) the candidate of least combined time is taken.
  // The lower bound keeps the plain roofline (no tiles, efficiency 1), which no tiling beats.
  // `memo_id`: which of LatencyModel's per-shape memos holds this GEMM (-1: none; the shape
  // must be the same at every call with that id, which the model's fixed dimensions ensure).
  OpCost gemm(std::string_view name, double m, double k, double n, double weight_elems, double reps,
              int memo_id, Weights kind = Weights::kLinear) const;

  // Elementwise kernels (norms, activation, adds, rotary, gathers, KV writes), run `reps` times:
  // each kernel moves its bytes at the class's memory rate but takes at least the profile's
  // elementwise floor (a small kernel's minimum duration) plus its latency terms
  // (elementwise_latency_s: `kernel_ctas`, each kernel's CTAs, and `serial_loads`, each
  // thread's dependent loads), plus its launch overhead.
  OpCost elementwise(std::string_view name, std::initializer_list<double> kernel_bytes,
                     double flops, double reps, double m,
                     std::initializer_list<double> kernel_ctas = {}, double serial_loads = 0) const;

  // The embedding gather of m tokens: one kernel reading m rows of weights and writing m rows of
  // activations; at up to kIndexSelectSmallIndices tokens each thread loads them one by one.
  OpCost embedding(double m) const {
    const double serial_loads = m <= kIndexSelectSmallIndices ? m : 0.0;
    return elementwise("embedding", {m * s_.hidden * (s_.ewb + kActBytes)}, 0.0, 1, m, {},
                       serial_loads);
  }

  // Extra reads of a varlen batch's decode KV from HBM, as a multiple of reading it once
  // (attention_cost.cc): `ctas_per_head` CTAs a query head, `head_kv_bytes` one KV head's keys
  // and values of the whole batch.
  double decode_kv_rereads(double ctas_per_head, double sms, double head_kv_bytes) const;

  // Query-key pairs of a causal chunk of q queries after ctx tokens: query i sees
  // min(ctx + i + 1, window) keys.
  double causal_pairs(double q, double ctx) const;

  // Prefill attention over all chunks, per layer, summed over layers. With varlen_tiles(impl),
  // the chunks and `n_decode` decodes of total context `decode_context` as one FlashAttention
  // varlen kernel (models/latency/flash_tiles.h); otherwise the decodes are not costed here.
  OpCost prefill_attention(const std::vector<PrefillChunk>& chunks, AttentionKind impl,
                           double n_decode = 0, double decode_context = 0) const;

  // Whether a batch with prefill chunks runs its attention, decodes included, as one tiled
  // varlen kernel (the profile's fitted `flash_tiles`; the lower bound keeps the roofline).
  bool varlen_tiles(AttentionKind impl) const {
    return !ideal_ && p_.flash_tiles.fitted && impl == AttentionKind::kFlash && s_.kv_lora == 0;
  }

  // Decode attention's terms for n sequences (those that do not depend on their context).
  DecodeTerms decode_terms(double n, int block_tokens, AttentionKind impl) const;

  // Seconds per context token of a decode iteration (the b of a + b t), all layers.
  double decode_slope(double n, int block_tokens, AttentionKind impl) const {
    return decode_terms(n, block_tokens, impl).slope * s_.layers;
  }

  // `mixed`: the batch also holds prefill chunks (Profile::mixed_decode_slope_factor).
  OpCost decode_attention(double n, double t, int block_tokens, AttentionKind impl,
                          bool mixed = false) const;

  // All-reduce of m x hidden activations, twice per layer (after O and after the MLP). With
  // `comm_` and a measured curve, each call takes the curve's time for its message (m x hidden
  // x 2 bytes) on the path vLLM picks (collectives.h); else, and in the lower bound, the derived
  // ring formula: 2 (t - 1) / t of the message over the link, plus the profile's latency.
  OpCost allreduce(double m) const;

  // Expert parallelism across data-parallel replicas, as vLLM's default allgather_reducescatter
  // backend runs it: per MoE layer, an all-gather of the `gathered` rows of hidden states the
  // d replicas bring (their token counts as DPMetadata holds them, padding included) and a
  // reduce-scatter of as many rows of expert output, `gathered` x hidden x 2 bytes each; this
  // rank runs `m` rows. Measured curves where the GPU has them (Collectives::ep_exchange);
  // derived: the (d - 1) / d of both buffers that cross the link, two collectives per MoE
  // layer, each with the all-reduce's fixed latency.
  OpCost all_to_all(double m, double gathered) const;

  // Pipeline parallelism: p - 1 stage boundaries. Measured: vLLM sends the hidden states and
  // the residual (two m x hidden tensors), each TP rank a 1 / t slice (send_tensor_dict with
  // the TP group as all_gather_group), and the next stage all-gathers them over its TP group.
  // Derived: m x hidden x 2 bytes over the all-reduce's link, one way, plus its fixed latency.
  OpCost pipeline_send(double m) const;

 private:
  double peak_bytes(OpClass c) const {
    if (c != OpClass::kAllReduce) return g_.hbm_bytes_per_s;
    // The catalog's NVLink figure is the aggregate of both directions; a ring sends one way.
    return g_.nvlink_bytes_per_s > 0 ? g_.nvlink_bytes_per_s / 2 : g_.pcie_bytes_per_s;
  }

  // The flash curve's head-dimension factor (the same for every chunk).
  double flash_head_dim_curve() const;
  // A collective of `traffic` bytes per call taking `per_call_s`, `calls` times.
  static OpCost collective(std::string_view name, double traffic, double per_call_s, double calls,
                           const CommDetail& detail);
  // The derived formula's rates: the link at the profile's efficiency plus its fixed latency
  // (over PCIe when GPU peer-to-peer is off).
  Rates link_rates(double m) const;
  // prefill_attention under varlen_tiles().
  OpCost varlen_attention(const std::vector<PrefillChunk>& chunks, double n_decode,
                          double decode_context) const;

  const LatencyShape& s_;
  const GpuSpec& g_;
  const Profile& p_;
  bool ideal_;
  Memo* memo_;
  const Collectives* comm_;
};

}  // namespace kvsim
