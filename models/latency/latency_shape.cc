#include "models/latency/latency_shape.h"

#include <algorithm>

#include "models/latency/sampler_cost.h"

namespace kvsim {

namespace {

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

}  // namespace

LatencyShape latency_shape_of(const ModelSpec& m, const GpuSpec& g, Parallelism par) {
  const int tp = par.tensor, pp = par.pipeline;
  LatencyShape s{};
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
  // The sampler sees the whole vocabulary on every GPU (the logits are gathered before it).
  s.sampler_l2_sequences =
      sampler_l2_sequences(static_cast<double>(g.l2_bytes), static_cast<double>(m.vocab));
  s.tp = tp;
  s.pp = pp;
  return s;
}

}  // namespace kvsim
