// A latency profile: how far below the GPU's datasheet peaks each class of operation runs, and
// the fixed costs around it. The GPU spec gives the peaks; the profile gives the efficiencies.
// `default_profile(gpu)` holds kvsim's hand-picked defaults (each number's source is in
// models/catalog/profiles/a100-sxm4-80gb.yaml and docs/latency.md); the calibration harness
// (validate/) writes the same YAML format with measured values through write_profile_yaml().
#pragma once

#include <array>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvsim {

struct GpuSpec;

// The operation classes a profile can tune separately. Every operation of an iteration belongs
// to exactly one class (see LatencyModel).
enum class OpClass {
  kGemm,             // linear layers: QKV/O projections, MLP, MoE experts, LM head
  kAttentionNative,  // prefill attention with the score matrix in HBM (eager PyTorch)
  kAttentionFlash,   // prefill attention, tiled with online softmax (FlashAttention-2)
  kAttentionDecode,  // one query token per sequence reading the KV cache (paged or contiguous)
  kElementwise,      // norms, activations, residual adds, rotary, embedding gather, KV writes
  kAllReduce,        // tensor-parallel all-reduce over NVLink (PCIe when the part has none)
};
inline constexpr size_t kNumOpClasses = 6;

std::string_view op_class_name(OpClass c);  // "gemm", "attention_native", ...
// Throws InputError listing the valid names.
OpClass parse_op_class(std::string_view name);

// Efficiencies and fixed costs of one class.
struct ClassParams {
  double compute_efficiency = 1.0;  // achieved / peak FLOP/s, in (0, 1]
  double memory_efficiency = 1.0;   // achieved / peak bytes/s (HBM; the link for kAllReduce)
  double launch_overhead_s = 0.0;   // per kernel launch
  std::string source;               // where these numbers come from (kept by the writer)
};

// The variable of a measured table.
enum class TableAxis {
  kTokens,     // rows through the operation (batched tokens) - gemm, elementwise, allreduce
  kSeqLen,     // keys per query of a prefill chunk (context + chunk) - attention_native/flash
  kBatch,      // decode sequences in the batch - attention_decode
  kBlockSize,  // paged block size in tokens, 0 = contiguous - attention_decode
};
std::string_view table_axis_name(TableAxis a);  // "tokens", "seq_len", "batch", "block_size"

enum class TableMetric { kComputeEfficiency, kMemoryEfficiency };

// A measured efficiency curve. When present it REPLACES the class's scalar efficiency and its
// built-in curve for that metric: efficiency = piecewise-linear interpolation of `points` at the
// axis value, clamped to the first/last point outside the measured range. Points are sorted by
// x, x strictly increasing, y in (0, 1]. At most one table per (class, metric).
struct EfficiencyTable {
  OpClass op_class = OpClass::kGemm;
  TableMetric metric = TableMetric::kComputeEfficiency;
  TableAxis axis = TableAxis::kTokens;
  std::vector<std::pair<double, double>> points;
  std::string source;

  double at(double x) const;  // Requires: !points.empty()
};

// The fused-MoE kernel's cost (vLLM's FusedMoE: the gate/up and down GEMMs of every routed
// expert a batch activates, in one kernel) as a fitted term, used instead of the GEMM class for
// the routed experts when `fitted` (models/latency/fused_moe.h): one layer costs
//   constant_s + activated experts' weight bytes / (HBM peak x memory_efficiency)
//              + routed rows' FLOPs / (tensor peak x compute_efficiency).
// Fitted by `kvsim-validate import llmservingsim` from a bundle's moe.csv (docs/fidelity.md).
struct RoutedExpertsCost {
  bool fitted = false;
  double constant_s = 0.0;
  double memory_efficiency = 1.0;
  double compute_efficiency = 1.0;
  std::string source;
};

// Prefill and mixed attention costed from FlashAttention-2's tiles and waves
// (models/latency/flash_tiles.h) instead of the flash curve, when `fitted`: per layer,
//   launch + max(waves x wave_overhead_s + wave tiles x one tile's FLOPs / (the tensor peak / SMs
//   x flash compute efficiency), bytes / (HBM peak x flash memory efficiency)),
// and a mixed batch's decodes run inside the same kernel (no attention_decode operation, no
// mixed_decode_slope_factor). Fitted by `kvsim-validate import llmservingsim` (docs/fidelity.md).
struct FlashTiles {
  bool fitted = false;
  double wave_overhead_s = 0.0;  // per wave: a CTA's prologue and epilogue (Q load, O write)
  std::string source;
};

struct Profile {
  std::string name;    // e.g. "a100-sxm4-80gb-default"
  std::string gpu;     // catalog GPU this profile describes ("" = any)
  std::string source;  // provenance of the whole file (hand-written, or calibration run id)

  std::array<ClassParams, kNumOpClasses> classes{};

  // Built-in curves (used when no table replaces them):
  // flash prefill compute efficiency x s/(s + flash_seq_half_tokens) x min(1, D/128)^exp
  double flash_seq_half_tokens = 0.0;
  double flash_head_dim_exponent = 0.0;
  // decode attention: reading a sequence's ctx tokens of KV costs as if it were
  // ctx + decode_context_half_tokens tokens (the kernel's latency floor on short contexts; the
  // same as a memory efficiency of ctx/(ctx + half)). Keeps decode time affine in the context.
  double decode_context_half_tokens = 0.0;
  // paged decode reads run at block/(block + paged_block_half_tokens) of the contiguous rate.
  double paged_block_half_tokens = 0.0;
  // native attention: HBM passes over the B x H x s x s score matrix (write QK^T, softmax read
  // and write, read for PV = 4), each of `native_score_bytes` per element.
  double native_score_passes = 4.0;
  double native_score_bytes = 2.0;
  // GEMM tiling (LatencyModel: tiles and waves over the SMs). A tile of tm x tn outputs runs at
  // gemm compute efficiency x I/(I + h) x (64 + h)/64, capped at 1, where I = tm tn/(tm + tn) is
  // its arithmetic intensity in FLOPs per loaded element and h = gemm_tile_half_intensity (a
  // 128x64 tile, I = 64, runs at the class's efficiency; smaller tiles slower, larger faster).
  double gemm_tile_half_intensity = 16.0;
  // Compute and memory time of the chosen tiling overlap imperfectly:
  // seconds = (compute^q + memory^q)^(1/q), q = gemm_combine_exponent (q -> inf: the hard max).
  double gemm_combine_exponent = 3.0;
  // The shortest an elementwise kernel (norm, activation, add, rotary, gather, KV write) can
  // run, however little it moves: seconds = max(floor, bytes / rate) per kernel.
  double elementwise_floor_s = 0.0;
  // An elementwise kernel's bytes, as far as they fit in the GPU's L2 (the activations the
  // previous kernel wrote are still there), move this many times faster than the class's HBM
  // rate; the bytes beyond L2 move at the HBM rate. 1 = no L2 effect (kvsim's default profiles).
  double elementwise_l2_speedup = 1.0;
  // An elementwise kernel's latency terms beside its bytes: seconds per CTA per SM (a kernel of
  // one small CTA per row: vLLM's rms_norm over Qwen3's head rows) and per serial dependent load
  // (PyTorch's index_select at up to 16 indices: each thread loops over the indices). The kernel
  // takes max(floor + these, its bytes' time). 0 = no term (kvsim's default profiles).
  double elementwise_cta_s = 0.0;
  double elementwise_serial_load_s = 0.0;
  // Decode attention in a batch that also holds a prefill chunk: its per-context-token time
  // (the slope) times this factor. vLLM's FlashAttention backend runs such a batch as one varlen
  // kernel whose decode rows lose the decode-only path's GQA packing and split-KV (measured on
  // an RTX PRO 6000: 128 decodes of 2,048 tokens take 760 us alone and 1,543 us beside a
  // 64-token chunk). 1 = the decode-only cost.
  double mixed_decode_slope_factor = 1.0;
  std::string curves_source;

  double iteration_overhead_s = 0.0;  // per engine step: scheduling, sampling, detokenising
  // Per sequence that samples a token in the step (every decode, and each prefill chunk that
  // ends its prompt): the sampler's kernels and the per-request host work that grow with the
  // batch (a measured `sampler` time per sequence count, e.g. LLMServingSim's per_sequence.csv).
  double per_sequence_overhead_s = 0.0;
  // Added per sequence beyond those whose FP32 logits and probabilities fit in the GPU's L2
  // (models/latency/sampler_cost.h): past that count the sampler's passes over the logits read
  // HBM. 0: the per-sequence cost is one slope (profiles before this term).
  double per_sequence_past_l2_s = 0.0;
  double allreduce_latency_s = 0.0;  // per all-reduce call, on top of the bandwidth term
  std::string overheads_source;

  RoutedExpertsCost routed_experts;  // YAML `routed_experts:` (absent: not fitted)
  FlashTiles flash_tiles;            // YAML `flash_tiles:` (absent: the flash curve)

  std::vector<EfficiencyTable> tables;

  ClassParams& of(OpClass c) { return classes[static_cast<size_t>(c)]; }
  const ClassParams& of(OpClass c) const { return classes[static_cast<size_t>(c)]; }
  // The table replacing (class, metric), if any.
  const EfficiencyTable* table(OpClass c, TableMetric m) const;
};

// The prefill flash-attention kernel generation: FlashAttention-2 (Ampere and later) or
// FlashAttention-3 (Hopper only: TMA, warp specialisation, wgmma).
enum class FlashKernel { kFa2, kFa3 };
std::string_view flash_kernel_name(FlashKernel k);  // "fa2", "fa3"
// vLLM's choice: FA3 on Hopper (compute capability 9.x), FA2 elsewhere.
FlashKernel default_flash_kernel(const GpuSpec& gpu);

// kvsim's profile for `gpu`: fitted to measured kernel times where measurements exist (A100,
// H100), derived from the nearest fitted GPU otherwise, with its sources and held-out error in
// each class's `source` (models/catalog/profiles/<gpu>.yaml holds the same numbers; docs/
// fidelity.md the fits). `flash` picks the flash-attention generation (default: vLLM's choice);
// throws InputError for FA3 on a GPU that is not Hopper.
Profile default_profile(const GpuSpec& gpu, std::optional<FlashKernel> flash = std::nullopt);

// Every efficiency 1, every overhead and latency floor 0, no tables: the physical lower bound.
Profile ideal_profile();

// Reads a profile YAML (format: docs/latency.md). Keys that are absent keep kvsim's defaults
// (default_profile()). Throws ConfigError with file:line:col on any schema error or unknown key.
Profile load_profile(const std::filesystem::path& path);
Profile parse_profile(std::string_view yaml_text, const std::string& source_name);

// Writes `p` in the format load_profile() reads; load_profile(write_profile_yaml(p)) == p
// (up to the 17 significant digits written).
std::string write_profile_yaml(const Profile& p);

}  // namespace kvsim
