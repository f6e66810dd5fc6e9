#include "models/latency/latency_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>
#include <initializer_list>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "core/check.h"
#include "core/errors.h"
#include "models/parallelism.h"

namespace kvsim {

// Per-GPU shapes, as doubles: every count below is a product of these. LatencyModel computes
// them once (shape_).
struct LatencyShape {
  double layers, hidden, head_dim, q_heads, kv_heads, ffn, vocab, experts, topk;
  // Mixture of experts (docs/latency.md "Mixture of experts"): layers with routed experts and
  // with a dense MLP of `ffn`; the routed experts' width, the experts this GPU holds and the
  // shared experts' width (per GPU); the tokens entering one MoE layer per token of this
  // replica's batch (d: the data-parallel replicas' batches meet there); the expert-parallel
  // group whose GPUs exchange tokens by all-to-all (0: no expert parallelism).
  double moe_layers, dense_layers, expert_ffn, local_experts, shared_ffn, moe_token_scale, ep_group;
  // MLA (0 kv_lora: none): the latent and rotary key widths, the query's low rank, the value head.
  double kv_lora, rope_dim, q_lora, v_head_dim;
  double kv_elems;  // KV elements one token writes per layer on this GPU
  double wb, kvb;  // bytes per linear-layer weight (with its quantization scales) / KV element
  double xwb;       // bytes per routed-expert weight (wb unless the experts have their own type)
  double expert_flops_scale;  // gemm_flops_scale of the routed experts' GEMMs
  double ewb;      // bytes per unquantized weight: embedding, LM head, router (16-bit)
  double gemm_flops_scale;  // peak of the linear layers' GEMMs / the FP16 peak
  double window;            // sliding-window attention: keys a query sees at most; 0: no window
  bool qk_norm;             // per-head RMSNorm on Q and K (Qwen3)
  int tp, pp;
};

namespace {

using Shape = LatencyShape;

// Activations are FP16/BF16 whatever the weight and KV types: quantized weights are read at
// their width and dequantised into 16-bit GEMMs, except FP8 weights on a GPU with an FP8 peak,
// whose GEMMs run at that peak (vLLM's FP8 W8A8 path on Hopper).
constexpr double kActBytes = 2.0;

// Bytes per weight of a linear layer, scales included: AWQ INT4 adds an FP16 scale and a 4-bit
// zero per group of g (2.5 / g bytes per weight), MXFP4 a byte per 32, NVFP4 a byte per 16,
// block-wise FP8 four bytes per b x b block; the per-tensor (FP8) and per-channel (INT8) scales
// are under a thousandth of a byte per weight and left out of the reads.
double linear_weight_bytes(DType w, int group) {
  if (w == DType::kInt4) {
    return 0.5 + 2.5 / static_cast<double>(group > 0 ? group : kInt4GroupSize);
  }
  if (w == DType::kMxfp4) return 0.5 + 1.0 / static_cast<double>(kMxfp4Group);
  if (w == DType::kNvfp4) return 0.5 + 1.0 / static_cast<double>(kNvfp4Group);
  if (w == DType::kFp8 && group > 0) return 1.0 + 4.0 / (static_cast<double>(group) * group);
  return dtype_bits(w) / 8.0;
}

// The peak of GEMMs whose weights are `w`, over the FP16 peak: FP8 weights run at the FP8
// tensor peak where the GPU has one (vLLM's W8A8 FP8 path), MXFP4 and NVFP4 weights at the FP4
// peak where it has one (Blackwell: vLLM's FlashInfer/CUTLASS FP4 MoE and NVFP4 GEMMs); else
// weights are dequantised into 16-bit GEMMs (weight-only: AWQ/Marlin, Marlin's MXFP4 and NVFP4
// on Hopper and older) at the FP16 peak.
double gemm_peak_scale(DType w, const GpuSpec& g) {
  if (w == DType::kFp8 && g.fp8_flops > 0) return g.fp8_flops / g.fp16_flops;
  if ((w == DType::kMxfp4 || w == DType::kNvfp4) && g.fp4_flops > 0) {
    return g.fp4_flops / g.fp16_flops;
  }
  return 1.0;
}

Shape shape_of(const ModelSpec& m, const GpuSpec& g, Parallelism par) {
  const int tp = par.tensor, pp = par.pipeline;
  Shape s{};
  s.layers = m.layers;
  s.hidden = m.hidden;
  s.head_dim = m.head_dim;
  s.q_heads = static_cast<double>(m.heads) / tp;
  // KV heads split across GPUs; with fewer KV heads than GPUs each GPU holds one replica.
  s.kv_heads = std::max(1.0, static_cast<double>(m.kv_heads) / tp);
  s.ffn = static_cast<double>(m.ffn) / tp;
  s.vocab = static_cast<double>(vocab_per_gpu(m, tp));
  s.experts = m.num_experts;
  s.topk = m.experts_per_token;
  s.moe_layers = m.moe_layers_in(0, m.layers);
  s.dense_layers = s.layers - s.moe_layers;
  s.expert_ffn = m.moe() ? static_cast<double>(routed_ffn_per_gpu(m, par)) : s.ffn;
  s.local_experts = local_experts(m, par);
  s.shared_ffn = static_cast<double>(m.shared_expert_ffn) / tp;
  s.moe_token_scale = par.data;
  s.ep_group = par.expert ? par.expert_group() : 0;
  s.kv_lora = m.kv_lora_rank;
  s.rope_dim = m.qk_rope_head_dim;
  s.q_lora = m.q_lora_rank;
  s.v_head_dim = m.value_head_dim();
  s.kv_elems = static_cast<double>(m.kv_elements_per_layer(kv_heads_per_gpu(m, tp)));
  s.wb = linear_weight_bytes(m.weight_dtype, m.weight_group);
  s.xwb = linear_weight_bytes(m.routed_weight_dtype(), m.weight_group);
  s.expert_flops_scale = gemm_peak_scale(m.routed_weight_dtype(), g);
  s.ewb = unquantized_bytes(m.weight_dtype);
  s.kvb = dtype_bytes(m.kv_dtype);
  s.gemm_flops_scale = gemm_peak_scale(m.weight_dtype, g);
  s.window = m.sliding_window.value_or(0);
  s.qk_norm = m.qk_norm;
  s.tp = tp;
  s.pp = pp;
  return s;
}

// The rates one operation runs at.
struct Rates {
  double flops_per_s;
  double bytes_per_s;
  double launch_s;
};

// Output tile shapes (rows x columns) of the GEMM kernels cuBLAS and CUTLASS pick among for
// FP16 on Ampere and Hopper (CUTLASS's default threadblock shapes), then the 16-row tiles of the
// skinny kernels that batch-1 decode with quantized weights uses (Marlin and AWQ's GEMV-like
// kernels: one m16 tensor-core fragment of rows).
constexpr std::pair<int64_t, int64_t> kTiles[] = {
    {64, 64},  {128, 64},  {64, 128},  {128, 128}, {256, 64},
    {64, 256}, {256, 128}, {128, 256}, {16, 128},  {16, 256}};

// Row counts LatencyModel's GEMM memo keeps (larger batches are costed afresh): grown as batches
// of more rows appear, at most 6 x 24 B x 16k.
constexpr size_t kGemmMemoMaxRows = size_t{1} << 14;

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
DecodeAttentionTotals decode_attention_totals(const DecodeTerms& d, double n, double t,
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
DecodeTerms mixed_terms(DecodeTerms d, const Profile& p, bool ideal) {
  if (!ideal) d.slope *= p.mixed_decode_slope_factor;
  return d;
}

// Decode attention's cost at total context t from its terms: the one formula both the full
// costing and the decode-step memo (LatencyModel::DecodeStepMemo) use, so they give the same bits.
OpCost decode_attention_at(const DecodeTerms& d, double n, double t, double layers, bool ideal) {
  OpCost o;
  o.name = "attention_decode";
  o.op_class = OpClass::kAttentionDecode;
  const DecodeAttentionTotals a = decode_attention_totals(d, n, t, layers);
  o.flops = a.flops;
  o.bytes = a.bytes;
  o.compute_s = o.flops / d.r.flops_per_s;
  o.memory_s = (d.kv_per_token * (t + d.floor_tokens) + d.qo_bytes) * layers / d.r.bytes_per_s;
  o.overhead_s = (n > 0 ? d.r.launch_s : 0.0) * layers;
  o.seconds = ideal ? std::max(o.compute_s, o.memory_s)  // the exact roofline
                    : a.seconds;
  o.bound = o.compute_s >= o.memory_s ? Bound::kCompute : Bound::kMemory;
  return o;
}

// Which weights a GEMM reads: a decoder linear layer's (weight_dtype), the routed experts'
// (their own type when they have one) or 16-bit ones (router, LM head).
enum class Weights { kLinear, kExperts, kUnquantized };

class Costing {
 public:
  using Memo = std::vector<std::array<GemmMemo, 6>>;  // by row count, then memo id
  Costing(const Shape& s, const GpuSpec& g, const Profile& p, bool ideal, Memo* memo = nullptr)
      : s_(s), g_(g), p_(p), ideal_(ideal), memo_(memo) {}

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

  // A GEMM of m rows, k inputs, n outputs (per GPU), weights read once. `quantized`: a decoder
  // linear layer, whose weights are weights_dtype; else (router, LM head) 16-bit weights.
  // Costed from its tiling (docs/latency.md "GEMMs: tiles and waves"): the output is cut into
  // tiles of one of kTiles' shapes, optionally split along k (split-K) while that still fits one
  // wave; the tiles run in waves of one tile per SM, each wave taking a whole tile's compute time
  // however few tiles it holds. Compute and memory combine smoothly, and like cuBLAS's heuristics
  // (which pick the fastest kernel) the candidate of least combined time is taken. The
  // lower bound keeps the plain roofline (no tiles, efficiency 1), which no tiling beats.
  // `memo_id`: which of LatencyModel's per-shape memos holds this GEMM (-1: none; the shape
  // must be the same at every call with that id, which the model's fixed dimensions ensure).
  OpCost gemm(std::string_view name, double m, double k, double n, double weight_elems,
              double reps, int memo_id, Weights kind = Weights::kLinear) const {
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
    const std::array<double, std::size(kTiles)> slowdown = tile_slowdown();
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
    const double one = q == 3.0 ? hi * std::cbrt(1.0 + x * x * x)
                                : hi * std::pow(1.0 + std::pow(x, q), 1.0 / q);
    if (slot != nullptr) *slot = {best_c, best_m, one};
    o.compute_s = best_c * reps;
    o.memory_s = best_m * reps;
    o.seconds = one * reps + o.overhead_s;
    o.bound = best_c >= best_m ? Bound::kCompute : Bound::kMemory;
    return o;
  }

  // Elementwise kernels (norms, activation, adds, rotary, gathers, KV writes), run `reps` times:
  // each kernel moves its bytes at the class's memory rate but takes at least the profile's
  // elementwise floor (a small kernel's minimum duration), plus its launch overhead.
  OpCost elementwise(std::string_view name, std::initializer_list<double> kernel_bytes,
                     double flops, double reps, double m) const {
    const Rates r = rates(OpClass::kElementwise, m);
    double bytes = 0;
    double one = 0;
    const double floor = ideal_ ? 0.0 : p_.elementwise_floor_s;
    for (double b : kernel_bytes) {
      bytes += b;
      one += std::max(floor, b / r.bytes_per_s);
    }
    OpCost o = op(name, OpClass::kElementwise, flops, bytes,
                  static_cast<double>(kernel_bytes.size()), reps, r);
    o.seconds = std::max(o.compute_s, one * reps) + o.overhead_s;
    return o;
  }

  // Query-key pairs of a causal chunk of q queries after ctx tokens: query i sees
  // min(ctx + i + 1, window) keys.
  double causal_pairs(double q, double ctx) const {
    const double full = q * ctx + q * (q + 1) / 2;
    const double w = s_.window;
    if (w <= 0 || ctx + q <= w) return full;
    if (ctx + 1 >= w) return q * w;
    // Queries 0 .. w - ctx - 1 see ctx + 1 .. w keys; the other q - (w - ctx) see w each.
    const double grow = w - ctx;
    return grow * ctx + grow * (grow + 1) / 2 + (q - grow) * w;
  }

  // Prefill attention over all chunks, per layer, summed over layers.
  OpCost prefill_attention(const std::vector<PrefillChunk>& chunks, AttentionKind impl) const {
    const OpClass c =
        impl == AttentionKind::kFlash ? OpClass::kAttentionFlash : OpClass::kAttentionNative;
    OpCost total;
    total.name = "attention_prefill";
    total.op_class = c;
    // Flash's curve: keys / (keys + flash_seq_half_tokens) x the head-dimension factor.
    const double head_dim_curve =
        impl == AttentionKind::kFlash && !ideal_ ? flash_head_dim_curve() : 1.0;
    const ClassTables class_tables = tables(c);
    for (const PrefillChunk& ch : chunks) {
      const double q = static_cast<double>(ch.tokens);
      const double ctx = static_cast<double>(ch.context_tokens);
      // Keys the chunk reads: the last query's and those before it; with a sliding window, only
      // those inside some query's window (positions ctx - window + 1 onwards).
      const double keys = s_.window > 0 ? std::min(ctx + q, s_.window - 1 + q) : ctx + q;
      // Q read + O written, K and V of every key read once.
      double bytes = 2.0 * q * s_.q_heads * s_.head_dim * kActBytes +
                     2.0 * keys * s_.kv_heads * s_.head_dim * s_.kvb;
      // FLOPs per query-key pair and head: QK^T and PV, 2 FLOPs per MAC.
      double pair_flops = 4.0 * s_.head_dim;
      double expand_flops = 0;
      if (s_.kv_lora > 0) {
        // MLA prefill (vLLM MLACommonImpl, forward_prefill): kv_b_proj expands every key's
        // latent into per-head K (qk_nope) and V, which are written and read back; attention is
        // then multi-head with head sizes qk (Q, K) and v (V, O).
        const double expanded = s_.q_heads * (s_.head_dim - s_.rope_dim + s_.v_head_dim);
        bytes = q * s_.q_heads * (s_.head_dim + s_.v_head_dim) * kActBytes +
                keys * s_.kv_elems * s_.kvb + s_.kv_lora * expanded * s_.wb +
                2.0 * keys * expanded * kActBytes;
        pair_flops = 2.0 * (s_.head_dim + s_.v_head_dim);
        expand_flops = 2.0 * keys * s_.kv_lora * expanded;
      }
      double flops = 0;
      double curve = 1.0;
      if (impl == AttentionKind::kFlash) {
        // Causal: query i of the chunk sees ctx + i + 1 keys (at most the window); masked tiles
        // are skipped.
        const double pairs = causal_pairs(q, ctx);
        flops = s_.kv_lora > 0 ? pair_flops * s_.q_heads * pairs + expand_flops
                               : 4.0 * s_.head_dim * s_.q_heads * pairs;
        if (!ideal_) curve = keys / (keys + p_.flash_seq_half_tokens) * head_dim_curve;
      } else {
        // Eager attention computes the whole q x keys rectangle, then masks it, and moves the
        // score matrix through HBM native_score_passes times.
        const double scores = s_.q_heads * q * keys;
        flops = s_.kv_lora > 0 ? pair_flops * scores + expand_flops : 4.0 * s_.head_dim * scores;
        bytes += p_.native_score_passes * p_.native_score_bytes * scores;
      }
      const OpCost one = op("", c, flops, bytes, 0, s_.layers, rates(c, class_tables, keys, curve));
      total.flops += one.flops;
      total.bytes += one.bytes;
      total.compute_s += one.compute_s;
      total.memory_s += one.memory_s;
      total.overhead_s += one.overhead_s;
      total.seconds += one.seconds;
    }
    // Launches per layer for the whole batch: one varlen flash kernel covers every chunk; eager
    // attention runs batched QK^T, masked softmax and PV (3 kernels).
    const double kernels = impl == AttentionKind::kFlash ? 1 : 3;
    const double launch = kernels * rates(c, class_tables, 0).launch_s * s_.layers;
    total.overhead_s += launch;
    total.seconds += launch;
    total.bound = total.compute_s >= total.memory_s ? Bound::kCompute : Bound::kMemory;
    return total;
  }

  DecodeTerms decode_terms(double n, int block_tokens, AttentionKind impl) const {
    const OpClass c = OpClass::kAttentionDecode;
    double block_curve = 1.0;
    if (!ideal_ && block_tokens > 0) {
      block_curve = block_tokens / (block_tokens + p_.paged_block_half_tokens);
    }
    const EfficiencyTable* tm = p_.table(c, TableMetric::kMemoryEfficiency);
    const double axis = tm && tm->axis == TableAxis::kBlockSize ? block_tokens : n;
    DecodeTerms d{};
    d.r = rates(c, axis, 1.0, block_curve);
    // Bytes per context token: its K and V; eager attention also moves its score.
    d.kv_per_token = 2.0 * s_.kv_heads * s_.head_dim * s_.kvb;
    if (impl == AttentionKind::kNative) {
      d.kv_per_token += p_.native_score_passes * p_.native_score_bytes * s_.q_heads;
    }
    d.flops_per_token = 4.0 * s_.head_dim * s_.q_heads;
    d.qo_bytes = n * 2.0 * s_.q_heads * s_.head_dim * kActBytes;
    d.flops_fixed = 0;
    if (s_.kv_lora > 0) {
      // MLA decode with the up-projections absorbed (vLLM MLACommonImpl, forward_decode): every
      // head's query is taken into the latent (q_nope x W_UK), attends over the one latent plus
      // rotary key as multi-query attention (QK over kv_lora + rope, PV over kv_lora), and its
      // latent output leaves through W_UV. Per context token: the latent once for all heads.
      // Per sequence: the two absorptions and their weights (kv_b_proj, read once a step).
      const double latent = s_.kv_lora + s_.rope_dim;
      const double nope = s_.head_dim - s_.rope_dim;
      d.kv_per_token = s_.kv_elems * s_.kvb;
      if (impl == AttentionKind::kNative) {
        d.kv_per_token += p_.native_score_passes * p_.native_score_bytes * s_.q_heads;
      }
      d.flops_per_token = 2.0 * s_.q_heads * (latent + s_.kv_lora);
      d.qo_bytes = n * s_.q_heads * (latent + s_.kv_lora) * kActBytes +
                   (n > 0 ? s_.kv_lora * s_.q_heads * (nope + s_.v_head_dim) * s_.wb : 0.0);
      d.flops_fixed = 2.0 * n * s_.q_heads * s_.kv_lora * (nope + s_.v_head_dim);
    }
    d.floor_tokens = ideal_ ? 0.0 : n * p_.decode_context_half_tokens;
    d.slope = std::max(d.flops_per_token / d.r.flops_per_s, d.kv_per_token / d.r.bytes_per_s);
    d.fixed = (d.kv_per_token * d.floor_tokens + d.qo_bytes) / d.r.bytes_per_s;
    if (d.flops_fixed > 0) d.fixed += d.flops_fixed / d.r.flops_per_s;
    return d;
  }

  // Seconds per context token of a decode iteration (the b of a + b t), all layers.
  double decode_slope(double n, int block_tokens, AttentionKind impl) const {
    return decode_terms(n, block_tokens, impl).slope * s_.layers;
  }

  // `mixed`: the batch also holds prefill chunks (Profile::mixed_decode_slope_factor).
  OpCost decode_attention(double n, double t, int block_tokens, AttentionKind impl,
                          bool mixed = false) const {
    DecodeTerms d = decode_terms(n, block_tokens, impl);
    if (mixed) d = mixed_terms(d, p_, ideal_);
    return decode_attention_at(d, n, t, s_.layers, ideal_);
  }

  // All-reduce of m x hidden activations, twice per layer (after O and after the MLP).
  OpCost allreduce(double m) const {
    const double payload = m * s_.hidden * kActBytes;
    const double traffic = 2.0 * (s_.tp - 1) / s_.tp * payload;  // ring: send and receive
    Rates r = rates(OpClass::kAllReduce, m);
    const double latency = ideal_ ? 0.0 : p_.allreduce_latency_s;
    r.launch_s += latency;
    return op("allreduce", OpClass::kAllReduce, 0.0, traffic, 1, 2 * s_.layers, r);
  }

  // Expert parallelism across data-parallel replicas: each MoE layer sends this GPU's share
  // of its rows (m / t tokens x top-k, 16-bit) to the experts' GPUs and gets the results back
  // (dispatch and combine), over the node's link one way; the (g - 1) / g of them whose expert
  // lives on another GPU cross it. Two collectives per MoE layer, each with the all-reduce's
  // fixed latency.
  OpCost all_to_all(double m) const {
    const double g = s_.ep_group;
    const double payload = m / s_.tp * s_.topk * s_.hidden * kActBytes * (g - 1) / g;
    Rates r = rates(OpClass::kAllReduce, m);
    r.launch_s += ideal_ ? 0.0 : p_.allreduce_latency_s;
    return op("all_to_all", OpClass::kAllReduce, 0.0, 2 * payload, 2, s_.moe_layers, r);
  }

  // Pipeline parallelism: the batch's m x hidden activations go from each stage to the next,
  // p - 1 point-to-point sends over the same link as the all-reduce, one way, each with the
  // all-reduce's fixed latency.
  OpCost pipeline_send(double m) const {
    const double payload = m * s_.hidden * kActBytes;
    Rates r = rates(OpClass::kAllReduce, m);
    r.launch_s += ideal_ ? 0.0 : p_.allreduce_latency_s;
    return op("pp_send", OpClass::kAllReduce, 0.0, payload, 1, s_.pp - 1, r);
  }

 private:
  double peak_bytes(OpClass c) const {
    if (c != OpClass::kAllReduce) return g_.hbm_bytes_per_s;
    // The catalog's NVLink figure is the aggregate of both directions; a ring sends one way.
    return g_.nvlink_bytes_per_s > 0 ? g_.nvlink_bytes_per_s / 2 : g_.pcie_bytes_per_s;
  }

  // Each tile shape's time relative to the full-wave efficiency: 1 / (I/(I + h) (64 + h)/64),
  // never faster than peak (profile.h, gemm_tile_half_intensity). Computed where a tile search
  // runs (a GEMM memo miss), not with every Costing.
  std::array<double, std::size(kTiles)> tile_slowdown() const {
    std::array<double, std::size(kTiles)> slowdown{};
    const double h = p_.gemm_tile_half_intensity;
    const double floor = p_.of(OpClass::kGemm).compute_efficiency;
    for (size_t i = 0; i < std::size(kTiles); ++i) {
      const auto [tm, tn] = kTiles[i];
      const double intensity = static_cast<double>(tm * tn) / static_cast<double>(tm + tn);
      slowdown[i] = std::max(floor, 64.0 * (intensity + h) / (intensity * (64 + h)));
    }
    return slowdown;
  }

  // The flash curve's head-dimension factor (the same for every chunk).
  double flash_head_dim_curve() const {
    // pow(1, y) is 1 for every y: most models' head dimension is 128 or more.
    const double base = std::min(1.0, s_.head_dim / 128.0);
    return base == 1.0 ? 1.0 : std::pow(base, p_.flash_head_dim_exponent);
  }

  const Shape& s_;
  const GpuSpec& g_;
  const Profile& p_;
  bool ideal_;
  Memo* memo_;
};

// Two operations reported as one named `name` (e.g. a MoE layer's shared experts: their gate/up
// and down GEMMs): FLOPs, bytes and times add.
OpCost merged(std::string_view name, const OpCost& a, const OpCost& b) {
  OpCost o = a;
  o.name = name;
  o.flops += b.flops;
  o.bytes += b.bytes;
  o.compute_s += b.compute_s;
  o.memory_s += b.memory_s;
  o.overhead_s += b.overhead_s;
  o.seconds += b.seconds;
  o.bound = o.compute_s >= o.memory_s ? Bound::kCompute : Bound::kMemory;
  return o;
}

void add(IterationCost& it, bool keep_ops, const OpCost& o) {
  if (o.flops == 0 && o.bytes == 0) return;
  it.ops_seconds += o.seconds;
  it.flops += o.flops;
  it.bytes += o.bytes;
  if (keep_ops) it.ops.push_back(o);
}

// Decode-only memos cover batches of up to this many sequences (larger ones are costed afresh).
constexpr size_t kDecodeMemoMaxSeqs = size_t{1} << 14;

// Decode attention's terms as a decode-step memo keeps them.
DecodeTerms memo_terms(const DecodeStepMemo& m) {
  const std::array<double, 10>& a = m.attention;
  return {{a[0], a[1], a[2]}, a[3], a[4], a[5], a[6], a[7], a[8], a[9]};
}

// Expected number of distinct experts that m tokens route to (uniform top-k routing).
double experts_touched(double experts, double topk, double m) {
  if (experts <= 1) return 1.0;
  return experts * (1.0 - std::pow(1.0 - topk / experts, m));
}

}  // namespace

std::string_view bound_name(Bound b) { return b == Bound::kCompute ? "compute" : "memory"; }

LatencyModel::LatencyModel(ModelSpec model, GpuSpec gpu, Profile profile, AttentionKind attention,
                           int tensor_parallel, int pipeline_parallel)
    : LatencyModel(std::move(model), std::move(gpu), std::move(profile), attention,
                   Parallelism{tensor_parallel, pipeline_parallel}) {}

LatencyModel::LatencyModel(ModelSpec model, GpuSpec gpu, Profile profile, AttentionKind attention,
                           Parallelism parallelism)
    : model_(std::move(model)),
      gpu_(std::move(gpu)),
      profile_(std::move(profile)),
      ideal_(ideal_profile()),
      attention_(attention),
      tp_(parallelism.tensor),
      pp_(parallelism.pipeline),
      par_(parallelism) {
  if (tp_ < 1) throw InputError(fmt::format("tensor parallel degree {}: expected >= 1", tp_));
  if (pp_ < 1) throw InputError(fmt::format("pipeline parallel degree {}: expected >= 1", pp_));
  if (model_.heads % tp_ != 0 || (model_.kv_heads >= tp_ && model_.kv_heads % tp_ != 0)) {
    throw InputError(fmt::format("model {} ({} heads, {} KV heads) cannot be split {} ways",
                                 model_.name, model_.heads, model_.kv_heads, tp_));
  }
  if (!(gpu_.fp16_flops > 0) || !(gpu_.hbm_bytes_per_s > 0)) {
    throw InputError(fmt::format("GPU {}: peak FLOP/s and bandwidth must be > 0", gpu_.name));
  }
  if (model_.layers < 1 || model_.hidden < 1 || model_.heads < 1 || model_.head_dim < 1) {
    throw InputError(
        fmt::format("model {}: layers, hidden, heads and head_dim must be >= 1", model_.name));
  }
  check_parallelism(model_, par_);
  shape_ = std::make_shared<const LatencyShape>(shape_of(model_, gpu_, par_));
}

namespace {
// A batch's row counts (doubles, as the costing uses them), checked.
struct BatchRows {
  double m;     // rows through the linear layers
  double emit;  // rows through the LM head
  double n;     // decode sequences
  double t;     // total decode context (attended tokens)
};
BatchRows batch_rows(const BatchShape& batch, const ModelSpec& model) {
  KVSIM_CHECK(batch.block_tokens >= 0, "block_tokens {}", batch.block_tokens);
  BatchRows r{0, 0, 0, 0};
  for (const PrefillChunk& c : batch.prefill) {
    KVSIM_CHECK(c.tokens >= 1 && c.context_tokens >= 0, "prefill chunk {} + {}", c.tokens,
                c.context_tokens);
    r.m += static_cast<double>(c.tokens);
    r.emit += c.emits_token ? 1 : 0;
  }
  for (const DecodeSeq& d : batch.decode) {
    KVSIM_CHECK(d.context_tokens >= 1, "decode context {}", d.context_tokens);
    r.t += static_cast<double>(model.attended_tokens(d.context_tokens));  // the window's KV
  }
  // Integers below 2^53 add exactly in a double, so adding the aggregate gives the same t as
  // adding its sequences one by one.
  KVSIM_CHECK(batch.decode_seqs >= 0 && batch.decode_context_tokens >= batch.decode_seqs,
              "decode aggregate {} seqs, {} context", batch.decode_seqs,
              batch.decode_context_tokens);
  r.t += static_cast<double>(batch.decode_context_tokens);
  r.n = static_cast<double>(static_cast<int64_t>(batch.decode.size()) + batch.decode_seqs);
  r.m += r.n;
  r.emit += r.n;
  return r;
}
}  // namespace

IterationCost LatencyModel::cost(const BatchShape& batch, const Profile& p, bool ideal,
                                 bool keep_ops) const {
  const BatchRows rows_in = batch_rows(batch, model_);
  const Shape& s = *shape_;
  const double m = rows_in.m, emit = rows_in.emit, n = rows_in.n, t = rows_in.t;
  IterationCost it;
  if (m == 0) return it;
  if (keep_ops) it.ops.reserve(16);  // cost()'s operations, at most 13
  // The GEMM memo's entries of this row count are likely out of cache (a mixed batch's row
  // count varies); start loading them now, so Costing's setup and the ops before the first
  // GEMM run while they arrive. Only a hint: no result depends on it.
  if (!ideal && m < static_cast<double>(gemm_memo_.size())) {
    const char* row = reinterpret_cast<const char*>(&gemm_memo_[static_cast<size_t>(m)]);
    for (size_t line = 0; line < sizeof(gemm_memo_[0]); line += 64) __builtin_prefetch(row + line);
  }
  const Costing k(s, gpu_, p, ideal, ideal ? nullptr : &gemm_memo_);

  const double L = s.layers;
  const double q_out = s.q_heads * s.head_dim;
  const double kv_out = s.kv_heads * s.head_dim;
  add(it, keep_ops, k.elementwise("embedding", {m * s.hidden * (s.ewb + kActBytes)}, 0.0, 1, m));
  if (s.kv_lora > 0) {
    // MLA's projections (vLLM DeepseekV2MLAAttention): q_a then q_b (or one q_proj), and
    // kv_a_proj_with_mqa to the latent and rotary key, as one op.
    const double latent = s.kv_lora + s.rope_dim;
    OpCost q = s.q_lora > 0
                   ? merged("", k.gemm("", m, s.hidden, s.q_lora, s.hidden * s.q_lora, L, -1),
                            k.gemm("", m, s.q_lora, q_out, s.q_lora * q_out, L, -1))
                   : k.gemm("", m, s.hidden, q_out, s.hidden * q_out, L, -1);
    add(it, keep_ops, merged("qkv_proj", q, k.gemm("", m, s.hidden, latent, s.hidden * latent, L, -1)));
    add(it, keep_ops, k.elementwise("kv_cache_write", {m * s.kv_elems * (kActBytes + s.kvb)}, 0.0, L, m));
  } else {
    add(it, keep_ops, k.gemm("qkv_proj", m, s.hidden, q_out + 2 * kv_out, s.hidden * (q_out + 2 * kv_out), L, 0));
    if (s.qk_norm) {
      // Qwen3's q_norm and k_norm: two RMSNorm kernels over the Q and K heads (read + write).
      add(it, keep_ops, k.elementwise("qk_norm", {2 * m * q_out * kActBytes, 2 * m * kv_out * kActBytes},
                                      5 * m * (q_out + kv_out), L, m));
    }
    add(it, keep_ops, k.elementwise("kv_cache_write", {m * 2 * kv_out * (kActBytes + s.kvb)}, 0.0, L, m));
  }
  if (!batch.prefill.empty()) add(it, keep_ops, k.prefill_attention(batch.prefill, attention_));
  if (n > 0) {
    add(it, keep_ops, k.decode_attention(n, t, batch.block_tokens, attention_, !batch.prefill.empty()));
  }
  if (s.kv_lora > 0) {
    const double v_out = s.q_heads * s.v_head_dim;
    add(it, keep_ops, k.gemm("o_proj", m, v_out, s.hidden, v_out * s.hidden, L, 1));
  } else {
    add(it, keep_ops, k.gemm("o_proj", m, q_out, s.hidden, q_out * s.hidden, L, 1));
  }
  if (s.tp > 1) add(it, keep_ops, k.allreduce(m));  // both per-layer calls (after O and after the MLP)

  // MLP (SwiGLU): gate and up in one GEMM, then down. A dense model's every layer; a MoE
  // model's dense layers as one op (dense_mlp). MoE layers route each row to top-k experts and
  // read the weights of every expert some row routed to; their shared experts see every row.
  const double moe_L = s.moe_layers;
  double rows = m * s.topk;  // rows through one layer's routed experts on this GPU
  if (s.experts > 1) {
    add(it, keep_ops, k.gemm("router", m, s.hidden, s.experts, s.hidden * s.experts, moe_L, 4, Weights::kUnquantized));
    // The tokens entering the layer (d replicas' batches) route uniformly: this GPU's experts
    // (all of them without expert parallelism) take their share of the rows.
    const double tokens = m * s.moe_token_scale;
    const double share = s.local_experts / s.experts;
    rows = share == 1.0 ? tokens * s.topk : std::ceil(tokens * s.topk * share);
    const double touched = experts_touched(s.experts, s.topk, tokens) * share;
    const double f = s.expert_ffn;
    add(it, keep_ops, k.gemm("mlp_gate_up", rows, s.hidden, 2 * f, touched * s.hidden * 2 * f, moe_L, -1,
                             Weights::kExperts));
    add(it, keep_ops, k.gemm("mlp_down", rows, f, s.hidden, touched * f * s.hidden, moe_L, -1,
                             Weights::kExperts));
    if (s.shared_ffn > 0) {
      const double sf = s.shared_ffn;
      add(it, keep_ops, merged("shared_experts",
                               k.gemm("", m, s.hidden, 2 * sf, s.hidden * 2 * sf, moe_L, -1),
                               k.gemm("", m, sf, s.hidden, sf * s.hidden, moe_L, -1)));
    }
    if (s.dense_layers > 0) {
      add(it, keep_ops, merged("dense_mlp",
                               k.gemm("", m, s.hidden, 2 * s.ffn, s.hidden * 2 * s.ffn, s.dense_layers, -1),
                               k.gemm("", m, s.ffn, s.hidden, s.ffn * s.hidden, s.dense_layers, -1)));
    }
    if (s.ep_group > 1 && s.moe_token_scale > 1) add(it, keep_ops, k.all_to_all(m));
  } else {
    add(it, keep_ops, k.gemm("mlp_gate_up", rows, s.hidden, 2 * s.ffn, s.hidden * 2 * s.ffn, L, 2));
    add(it, keep_ops, k.gemm("mlp_down", rows, s.ffn, s.hidden, s.ffn * s.hidden, L, 3));
  }

  // Two RMSNorms (read+write), two residual adds (2 reads, 1 write), SiLU x up (2 reads,
  // 1 write of the ffn rows), rotary on Q and K (read+write).
  const double norm_elems = m * s.hidden;
  // Activation elements per layer: the routed rows (and shared experts) of MoE layers, the
  // dense MLP's elsewhere, averaged over the layers.
  double act_elems = rows * s.ffn;
  if (s.experts > 1) {
    const double moe_act = rows * s.expert_ffn + m * s.shared_ffn;
    act_elems = s.dense_layers == 0 ? moe_act
                                    : (moe_L * moe_act + s.dense_layers * m * s.ffn) / L;
  }
  const double rope_elems =
      s.kv_lora > 0 ? m * (s.q_heads + 1) * s.rope_dim : m * (q_out + kv_out);
  const double norm_b = 2 * norm_elems * kActBytes;
  const double add_b = 3 * norm_elems * kActBytes;
  const double ew_flops = 10 * norm_elems + 5 * act_elems + 3 * rope_elems;
  add(it, keep_ops, k.elementwise("norm_act_residual",
                        {norm_b, norm_b, add_b, add_b, 3 * act_elems * kActBytes,
                         2 * rope_elems * kActBytes},
                        ew_flops, L, m));
  if (emit > 0) {
    add(it, keep_ops, k.gemm("lm_head", emit, s.hidden, s.vocab, s.hidden * s.vocab, 1, 5, Weights::kUnquantized));
  }
  // One batch runs its stages one after another (no micro-batches in flight): the layers are
  // all counted above, split over stages or not, and the sends between stages add to them.
  if (s.pp > 1) add(it, keep_ops, k.pipeline_send(m));
  it.overhead_seconds = ideal ? 0.0 : p.iteration_overhead_s + p.per_sequence_overhead_s * emit;
  it.seconds = it.ops_seconds + it.overhead_seconds;
  return it;
}

IterationCost LatencyModel::iteration(const BatchShape& batch, OpDetail detail) const {
  if (detail == OpDetail::kTotals) {
    IterationCost it;
    // The engine's decode-only iterations (the aggregate form) come from the decode-step memo,
    // every other batch's from the row memo.
    if (batch.prefill.empty() && batch.decode.empty() && batch.decode_seqs > 0 &&
        batch.block_tokens >= 0) {
      KVSIM_CHECK(batch.decode_context_tokens >= batch.decode_seqs,
                  "decode aggregate {} seqs, {} context", batch.decode_seqs,
                  batch.decode_context_tokens);
      if (decode_step_totals(batch.decode_seqs, batch.decode_context_tokens, batch.block_tokens,
                             it)) {
        return it;
      }
    }
    if (mixed_totals(batch, it)) return it;
  }
  return cost(batch, profile_, false, detail == OpDetail::kFull);
}

namespace {
// Row memo sizes: how many operations follow attention at most (o_proj, allreduce, router,
// mlp_gate_up, mlp_down, norm_act_residual, pp_send), and the row counts kept (as the GEMM memo).
constexpr int kRowMaxPostOps = 10;
constexpr int64_t kRowMemoMaxRows = static_cast<int64_t>(kGemmMemoMaxRows);

// add()'s sums for one operation's (seconds, flops, bytes), in add()'s rule: no work, no add.
void add_totals(IterationCost& it, double seconds, double flops, double bytes) {
  if (flops == 0 && bytes == 0) return;
  it.ops_seconds += seconds;
  it.flops += flops;
  it.bytes += bytes;
}
}  // namespace

bool LatencyModel::mixed_totals(const BatchShape& batch, IterationCost& out) const {
  const BatchRows r = batch_rows(batch, model_);
  IterationCost& it = out;
  it = IterationCost{};
  if (r.m == 0) return true;  // cost()'s empty batch
  const auto rows = static_cast<int64_t>(r.m);
  if (rows > kRowMemoMaxRows) return false;
  // Attention, the only operations that depend on more than the row counts.
  const Costing k(*shape_, gpu_, profile_, false);
  std::array<double, 3> prefill{}, decode{};  // (seconds, flops, bytes)
  if (!batch.prefill.empty()) {
    const OpCost a = k.prefill_attention(batch.prefill, attention_);
    prefill = {a.seconds, a.flops, a.bytes};
  }
  if (r.n > 0) {
    // Its terms depend on n and the block size only: the decode-step memo's.
    const DecodeStepMemo* d = decode_step_memo(static_cast<int64_t>(r.n), batch.block_tokens);
    DecodeTerms terms =
        d != nullptr ? memo_terms(*d) : k.decode_terms(r.n, batch.block_tokens, attention_);
    if (!batch.prefill.empty()) terms = mixed_terms(terms, profile_, false);
    const DecodeAttentionTotals a = decode_attention_totals(terms, r.n, r.t, shape_->layers);
    decode = {a.seconds, a.flops, a.bytes};
  }
  const double* row = row_ops(rows);
  if (row == nullptr) return false;
  const std::array<double, 3>* head = r.emit > 0 ? &head_op(static_cast<int64_t>(r.emit)) : nullptr;
  // cost()'s additions, in its order: the operations before attention (summed from 0, as it
  // sums them), prefill and decode attention, the operations after them with the LM head in its
  // place. add_totals skips what add() skips (an empty attention of zero work).
  it.ops_seconds = row[0];
  it.flops = row[1];
  it.bytes = row[2];
  if (!batch.prefill.empty()) add_totals(it, prefill[0], prefill[1], prefill[2]);
  if (r.n > 0) add_totals(it, decode[0], decode[1], decode[2]);
  const double* o = row + 3;
  for (int i = 0; i < row_head_at_; ++i, o += 3) add_totals(it, o[0], o[1], o[2]);
  if (head != nullptr) add_totals(it, (*head)[0], (*head)[1], (*head)[2]);
  for (int i = row_head_at_; i < row_post_ops_; ++i, o += 3) add_totals(it, o[0], o[1], o[2]);
  it.overhead_seconds = profile_.iteration_overhead_s + profile_.per_sequence_overhead_s * r.emit;
  it.seconds = it.ops_seconds + it.overhead_seconds;
  return true;
}

const double* LatencyModel::row_ops(int64_t rows) const {
  if (rows < 1 || rows > kRowMemoMaxRows) return nullptr;
  const auto m = static_cast<size_t>(rows);
  if (row_post_ops_ >= 0) {
    const size_t stride = 3 + 3 * static_cast<size_t>(row_post_ops_);
    if (m < row_memo_.size() / stride && row_memo_[m * stride] >= 0) return &row_memo_[m * stride];
  }
  // Cost one chunk of `rows` tokens in full once (attention aside, every operation depends on the
  // row count alone; it emits a token, so the LM head's place is known) and keep the sums
  // cost() forms: those before attention as partial sums, those after it one by one.
  BatchShape b;
  b.prefill.push_back(PrefillChunk{rows, 0, true});
  const IterationCost full = cost(b, profile_, false, true);
  std::array<double, 3 + 3 * kRowMaxPostOps> v{};
  int post = 0, head_at = -1;
  bool after = false;
  for (const OpCost& o : full.ops) {
    if (o.op_class == OpClass::kAttentionFlash || o.op_class == OpClass::kAttentionNative) {
      after = true;
    } else if (!after) {
      v[0] += o.seconds;
      v[1] += o.flops;
      v[2] += o.bytes;
    } else if (o.name == "lm_head") {
      head_at = post;
    } else {
      if (post == kRowMaxPostOps) return nullptr;  // not cost()'s operations: cost in full
      const auto i = static_cast<size_t>(3 + 3 * post++);
      v[i] = o.seconds;
      v[i + 1] = o.flops;
      v[i + 2] = o.bytes;
    }
  }
  // Every row count has the same operations; were one to differ, its batches cost in full.
  if (!after || head_at < 0) return nullptr;
  if (row_post_ops_ < 0) {
    row_post_ops_ = post;
    row_head_at_ = head_at;
  }
  if (post != row_post_ops_ || head_at != row_head_at_) return nullptr;
  const size_t stride = 3 + 3 * static_cast<size_t>(post);
  // Grown to the largest row count seen (the vector's capacity grows geometrically; the pages
  // past its size stay untouched).
  if (m >= row_memo_.size() / stride) row_memo_.resize((m + 1) * stride, -1.0);
  double* out = &row_memo_[m * stride];
  std::copy_n(v.begin(), stride, out);
  return out;
}

const std::array<double, 3>& LatencyModel::head_op(int64_t emit) const {
  const auto e = static_cast<size_t>(emit);
  if (e >= head_memo_.size()) head_memo_.resize(e + 1, {-1.0, 0.0, 0.0});
  std::array<double, 3>& h = head_memo_[e];
  if (h[0] >= 0) return h;
  // Cost `emit` decode sequences in full once: all their rows pass the LM head.
  BatchShape b;
  b.decode_seqs = emit;
  b.decode_context_tokens = emit;
  const IterationCost full = cost(b, profile_, false, true);
  for (const OpCost& o : full.ops) {
    if (o.name == "lm_head") h = {o.seconds, o.flops, o.bytes};
  }
  KVSIM_CHECK(h[0] >= 0, "head memo: no lm_head among {} ops", full.ops.size());
  return h;
}

IterationCost LatencyModel::lower_bound(const BatchShape& batch) const {
  return cost(batch, ideal_, true, true);
}

const DecodeStepMemo* LatencyModel::decode_step_memo(int64_t n, int block_tokens) const {
  if (static_cast<size_t>(n) >= kDecodeMemoMaxSeqs) return nullptr;
  if (decode_memo_.size() <= static_cast<size_t>(n)) {
    decode_memo_.resize(std::min(kDecodeMemoMaxSeqs, std::max<size_t>(64, 2 * static_cast<size_t>(n))));
  }
  DecodeStepMemo& m = decode_memo_[static_cast<size_t>(n)];
  if (m.block_tokens != block_tokens) {
    // Cost the batch in full once (the context is irrelevant to every operation but decode
    // attention) and keep what the additions around decode attention need, summed the same way.
    BatchShape b;
    b.block_tokens = block_tokens;
    b.decode_seqs = n;
    b.decode_context_tokens = n;
    const IterationCost full = cost(b, profile_, false, true);
    m = DecodeStepMemo{};
    m.block_tokens = block_tokens;
    bool after = false;
    for (const OpCost& o : full.ops) {
      if (o.op_class == OpClass::kAttentionDecode) {
        after = true;
      } else if (!after) {
        m.pre_seconds += o.seconds;
        m.pre_flops += o.flops;
        m.pre_bytes += o.bytes;
      } else {
        KVSIM_CHECK(m.post_count < static_cast<int>(m.post_seconds.size()), "decode memo: {} ops",
                    full.ops.size());
        const auto i = static_cast<size_t>(m.post_count++);
        m.post_seconds[i] = o.seconds;
        m.post_flops[i] = o.flops;
        m.post_bytes[i] = o.bytes;
      }
    }
    KVSIM_CHECK(after, "decode memo: no decode attention among {} ops", full.ops.size());
    const Shape& s = *shape_;
    m.layers = s.layers;
    const Costing k(s, gpu_, profile_, false);
    const DecodeTerms d = k.decode_terms(static_cast<double>(n), block_tokens, attention_);
    m.attention = {d.r.flops_per_s, d.r.bytes_per_s, d.r.launch_s,   d.kv_per_token,
                   d.flops_per_token, d.qo_bytes,    d.floor_tokens, d.slope,
                   d.fixed,           d.flops_fixed};
  }
  return &m;
}

bool LatencyModel::decode_step_totals(int64_t n, int64_t t, int block_tokens,
                                      IterationCost& out) const {
  const DecodeStepMemo* memo = decode_step_memo(n, block_tokens);
  if (memo == nullptr) return false;
  const DecodeStepMemo& m = *memo;
  const DecodeTerms d = memo_terms(m);
  // cost()'s additions, in its order: the operations before decode attention, decode
  // attention, the operations after it.
  IterationCost& it = out;
  it = IterationCost{};
  it.ops_seconds = m.pre_seconds;
  it.flops = m.pre_flops;
  it.bytes = m.pre_bytes;
  // t as cost() forms it: an integer below 2^53 converted exactly.
  const DecodeAttentionTotals a =
      decode_attention_totals(d, static_cast<double>(n), static_cast<double>(t), m.layers);
  if (a.flops != 0 || a.bytes != 0) {  // add()'s rule
    it.ops_seconds += a.seconds;
    it.flops += a.flops;
    it.bytes += a.bytes;
  }
  for (size_t i = 0; i < static_cast<size_t>(m.post_count); ++i) {
    it.ops_seconds += m.post_seconds[i];
    it.flops += m.post_flops[i];
    it.bytes += m.post_bytes[i];
  }
  it.overhead_seconds =
      profile_.iteration_overhead_s + profile_.per_sequence_overhead_s * static_cast<double>(n);
  it.seconds = it.ops_seconds + it.overhead_seconds;
  return true;
}

namespace {
// A decode-only batch with the given totals, in the aggregate form: the cost depends on contexts
// only through their sum, which is of attended tokens (each already within a sliding window).
BatchShape decode_batch(int64_t num_seqs, int64_t total_context_tokens, int block_tokens) {
  KVSIM_CHECK(num_seqs >= 0 && total_context_tokens >= num_seqs, "decode {} seqs, {} context",
              num_seqs, total_context_tokens);
  BatchShape b;
  b.block_tokens = block_tokens;
  b.decode_seqs = num_seqs;
  b.decode_context_tokens = total_context_tokens;
  return b;
}
}  // namespace

double LatencyModel::decode_step_seconds(int64_t num_seqs, int64_t total_context_tokens,
                                         int block_tokens) const {
  return iteration(decode_batch(num_seqs, total_context_tokens, block_tokens), OpDetail::kTotals)
      .seconds;
}

double LatencyModel::decode_step_lower_bound_seconds(int64_t num_seqs, int64_t total_context_tokens,
                                                     int block_tokens) const {
  return lower_bound(decode_batch(num_seqs, total_context_tokens, block_tokens)).seconds;
}

AffineCost LatencyModel::decode_step_affine(int64_t num_seqs, int block_tokens) const {
  KVSIM_CHECK(num_seqs >= 0, "num_seqs {}", num_seqs);
  if (num_seqs == 0) return {};
  // Everything but decode attention is independent of the context; decode attention is
  // slope * t + fixed per layer (Costing::decode_attention): b is the slope, a what remains.
  const Shape& s = *shape_;
  const Costing k(s, gpu_, profile_, false);
  const double n = static_cast<double>(num_seqs);
  const double b = k.decode_slope(n, block_tokens, attention_);
  const double whole_at_min = decode_step_seconds(num_seqs, num_seqs, block_tokens);
  return {whole_at_min - b * n, b};
}

bool DecodeStepFixed::Walk::parts_hold(int64_t n) const {
  constexpr int64_t kMostSteps = int64_t{1} << 20;
  return dv_ >= 0 && n <= kMostSteps && (v_ >> kNsShift) >= 1 &&
         ((v_ + dv_ * n) >> kNsShift) < (Int128{1} << 62);
}

bool DecodeStepFixed::Walk::ends_before(int64_t* out, int64_t n, int64_t from, int64_t before,
                                        const int64_t* weights, int64_t max_weight,
                                        EndSums& sums) {
  // v_ + i·dv_ = (hi + i·dh)·2^S + lo + i·dl with 0 <= lo, dl < 2^S: step i's ns (the shift)
  // is hi + i·dh + ((lo + i·dl) >> S), with no 128-bit step (parts_hold). The durations' sum is
  // at most the exact sum of the fixed-point values over 2^S (each ns is its value rounded
  // down): n·v + dv·n(n-1)/2. When `from` plus that is before `before`, every end is; and when
  // n times it (times the largest weight) is below 2^62, the ends and both sums fit in 64 bits.
  constexpr int kS = kNsShift;
  if (n <= 0 || from < 0 || max_weight < 0 || !parts_hold(n)) return false;
  const Int128 bound = (v_ * n + dv_ * (Int128{n} * (n - 1) / 2)) >> kS;
  const Int128 last = from + bound;
  if (last >= before || last * n * std::max<int64_t>(max_weight, 1) >= (Int128{1} << 62)) {
    return false;
  }
  constexpr Int128 kLow = (Int128{1} << kS) - 1;
  auto hi = static_cast<int64_t>(v_ >> kS);
  auto lo = static_cast<uint64_t>(v_ & kLow);
  const auto dh = static_cast<int64_t>(dv_ >> kS);
  const auto dl = static_cast<uint64_t>(dv_ & kLow);
  int64_t e = from, sum = 0, weighted = 0;
  // One loop, compiled with and without the weights (a run without crossings has none).
  const auto pass = [&](auto weigh) {
#pragma GCC unroll 4
    for (int64_t i = 0; i < n; ++i) {
      e += hi + static_cast<int64_t>(lo >> kS);
      sum += e;
      if constexpr (decltype(weigh)::value) weighted += weights[i] * e;
      out[i] = e;
      hi += dh;
      lo += dl;
    }
  };
  if (weights != nullptr) {
    pass(std::true_type{});
  } else {
    pass(std::false_type{});
  }
  v_ += dv_ * n;
  sums = {sum, weighted};
  return true;
}

Int128 flops_to_fixed(double flops) {
  return static_cast<Int128>(std::roundl(std::ldexp(static_cast<long double>(flops),
                                                      DecodeStepFixed::kFlopsShift)));
}

DecodeStepFixed LatencyModel::decode_step_fixed(int64_t num_seqs, int block_tokens) const {
  KVSIM_CHECK(num_seqs >= 1, "num_seqs {}", num_seqs);
  const auto n = static_cast<size_t>(num_seqs);
  const auto memo = [&]() -> DecodeStepMemo* {
    return n < decode_memo_.size() && decode_memo_[n].block_tokens == block_tokens
               ? &decode_memo_[n]
               : nullptr;
  };
  if (const DecodeStepMemo* m = memo(); m != nullptr && m->has_fixed) return m->fixed;
  // The duration's line from decode_step_affine; the FLOPs' from two costings far apart (FLOPs
  // are affine in T too: decode attention's scale with it, every other operation's with n only).
  // Both cost decode-only batches of n, which builds the memo entry for (n, block_tokens).
  DecodeStepFixed f;
  const AffineCost ab = decode_step_affine(num_seqs, block_tokens);
  const auto fixed = [](long double v, int shift) {
    return static_cast<Int128>(std::roundl(std::ldexp(v, shift)));
  };
  f.ns_a = fixed(static_cast<long double>(ab.a) * 1e9L, DecodeStepFixed::kNsShift);
  f.ns_b = fixed(static_cast<long double>(ab.b) * 1e9L, DecodeStepFixed::kNsShift);
  constexpr int64_t kSpan = int64_t{1} << 20;
  const auto flops_at = [&](int64_t t) {
    BatchShape b;
    b.block_tokens = block_tokens;
    b.decode_seqs = num_seqs;
    b.decode_context_tokens = t;
    return static_cast<long double>(iteration(b, OpDetail::kTotals).flops);
  };
  const long double f0 = flops_at(num_seqs);
  const long double slope = (flops_at(num_seqs + kSpan) - f0) / static_cast<long double>(kSpan);
  f.flops_b = fixed(slope, DecodeStepFixed::kFlopsShift);
  f.flops_a = fixed(f0 - slope * static_cast<long double>(num_seqs), DecodeStepFixed::kFlopsShift);
  if (DecodeStepMemo* m = memo(); m != nullptr) {  // past the memo's range: computed each time
    m->fixed = f;
    m->has_fixed = true;
  }
  return f;
}

SequenceLatency sequence_latency(const LatencyModel& m, int64_t seq_len, int64_t batch,
                                 int block_tokens) {
  KVSIM_CHECK(seq_len >= 1 && batch >= 1, "seq_len {} batch {}", seq_len, batch);
  SequenceLatency r;
  r.seq_len = seq_len;
  r.batch = batch;
  BatchShape pre;
  pre.block_tokens = block_tokens;
  pre.prefill.assign(static_cast<size_t>(batch), PrefillChunk{seq_len, 0, true});
  r.prefill = m.iteration(pre);
  r.prefill_bound = m.lower_bound(pre);
  r.prefill_s = r.prefill.ops_seconds;
  r.prefill_lower_bound_s = r.prefill_bound.ops_seconds;
  r.ttft_s = r.prefill.seconds;
  r.ttft_lower_bound_s = r.prefill_bound.seconds;
  BatchShape dec;
  dec.block_tokens = block_tokens;
  dec.decode.assign(static_cast<size_t>(batch), DecodeSeq{seq_len + 1});
  r.decode = m.iteration(dec);
  r.decode_bound = m.lower_bound(dec);
  r.decode_step_s = r.decode.seconds;
  r.decode_step_lower_bound_s = r.decode_bound.seconds;
  r.decode_tokens_per_s = static_cast<double>(batch) / r.decode_step_s;
  r.decode_tokens_per_s_upper_bound = static_cast<double>(batch) / r.decode_step_lower_bound_s;
  return r;
}

}  // namespace kvsim
