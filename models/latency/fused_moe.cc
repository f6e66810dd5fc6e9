#include "models/latency/fused_moe.h"

#include "models/latency/latency_shape.h"

namespace kvsim {

RoutedExpertsWork routed_experts_work(double rows, double activated, double hidden,
                                      double expert_ffn, double bytes_per_weight) {
  RoutedExpertsWork w;
  w.weight_bytes = activated * 3 * hidden * expert_ffn * bytes_per_weight;
  w.flops = 2 * rows * hidden * 3 * expert_ffn;
  // gate/up reads the rows (hidden) and writes 2 x ffn; down reads ffn and writes hidden.
  w.act_bytes = rows * (2 * hidden + 3 * expert_ffn) * kActBytes;
  return w;
}

double routed_experts_seconds(const RoutedExpertsCost& c, const RoutedExpertsWork& w,
                              double hbm_bytes_per_s, double flops_per_s) {
  return c.constant_s + w.weight_bytes / (hbm_bytes_per_s * c.memory_efficiency) +
         w.flops / (flops_per_s * c.compute_efficiency);
}

OpCost fused_moe_op(const RoutedExpertsCost& c, const RoutedExpertsWork& w, double layers,
                    double hbm_bytes_per_s, double flops_per_s) {
  OpCost o;
  o.name = "fused_moe";
  o.op_class = OpClass::kGemm;
  o.flops = w.flops * layers;
  o.bytes = (w.weight_bytes + w.act_bytes) * layers;
  o.compute_s = w.flops / (flops_per_s * c.compute_efficiency) * layers;
  o.memory_s = w.weight_bytes / (hbm_bytes_per_s * c.memory_efficiency) * layers;
  o.overhead_s = c.constant_s * layers;
  // The fit is additive (the kernel's weight streaming and its math overlap little at these
  // sizes, measured: docs/fidelity.md), so the seconds are the sum, not the max.
  o.seconds = routed_experts_seconds(c, w, hbm_bytes_per_s, flops_per_s) * layers;
  o.bound = o.compute_s >= o.memory_s ? Bound::kCompute : Bound::kMemory;
  return o;
}

}  // namespace kvsim
