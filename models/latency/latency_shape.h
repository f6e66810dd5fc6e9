// The per-GPU dimensions every costing of the latency model uses (LatencyShape), computed once
// per LatencyModel from the model, the GPU and the parallelism.
#pragma once

#include "models/gpu_spec.h"
#include "models/model_spec.h"
#include "models/parallelism.h"

namespace kvsim {

// Activations are FP16/BF16 whatever the weight and KV types: quantized weights are read at
// their width and dequantised into 16-bit GEMMs, except FP8 weights on a GPU with an FP8 peak,
// whose GEMMs run at that peak (vLLM's FP8 W8A8 path on Hopper).
inline constexpr double kActBytes = 2.0;

// Per-GPU shapes, as doubles: every count the costing forms is a product of these.
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
  double wb, kvb;   // bytes per linear-layer weight (with its quantization scales) / KV element
  double xwb;       // bytes per routed-expert weight (wb unless the experts have their own type)
  double expert_flops_scale;    // gemm_flops_scale of the routed experts' GEMMs
  double ewb;                   // bytes per unquantized weight: embedding, LM head, router (16-bit)
  double gemm_flops_scale;      // peak of the linear layers' GEMMs / the FP16 peak
  double window;                // sliding-window attention: keys a query sees at most; 0: no window
  bool qk_norm;                 // per-head RMSNorm on Q and K (Qwen3)
  double sampler_l2_sequences;  // sequences whose sampler working set fits in L2 (sampler_cost.h)
  int tp, pp;
};

// `m` split `par` ways on `g`.
LatencyShape latency_shape_of(const ModelSpec& m, const GpuSpec& g, Parallelism par);

}  // namespace kvsim
