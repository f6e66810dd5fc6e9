// The routed experts of one MoE layer as vLLM runs them: one fused kernel (FusedMoE,
// vllm/model_executor/layers/fused_moe/) that reads the gate/up and down weights of every
// expert the batch activates and multiplies each routed row through its expert. When the
// profile has a fitted `routed_experts` term (Profile::routed_experts) the latency model costs
// the layer with it instead of two GEMM-class operations; `kvsim-validate import llmservingsim`
// fits the term from moe.csv with the same work figures (routed_experts_work), so the fit and
// the model cannot drift apart.
#pragma once

#include "models/latency/latency_model.h"
#include "models/latency/profile.h"

namespace kvsim {

// One layer's work on one GPU.
struct RoutedExpertsWork {
  double weight_bytes = 0;  // the activated experts' gate/up and down weights, each read once
  double flops = 0;         // 2 x rows x hidden x 3 x expert_ffn (gate, up and down)
  double act_bytes = 0;     // the routed rows in and out of both GEMMs (16-bit)
};

// `rows` routed rows (tokens x top-k on this GPU), `activated` distinct experts among this GPU's,
// each of `hidden` x `expert_ffn` (this GPU's share of the width) x 3 weights of
// `bytes_per_weight`.
RoutedExpertsWork routed_experts_work(double rows, double activated, double hidden,
                                      double expert_ffn, double bytes_per_weight);

// Seconds of one layer under the term: constant + weights at the HBM peak x memory efficiency
// + FLOPs at `flops_per_s` (the experts' tensor peak) x compute efficiency.
double routed_experts_seconds(const RoutedExpertsCost& c, const RoutedExpertsWork& w,
                              double hbm_bytes_per_s, double flops_per_s);

// The op `fused_moe` (class gemm) of `layers` such layers.
OpCost fused_moe_op(const RoutedExpertsCost& c, const RoutedExpertsWork& w, double layers,
                    double hbm_bytes_per_s, double flops_per_s);

}  // namespace kvsim
