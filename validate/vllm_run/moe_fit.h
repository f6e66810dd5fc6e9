// The fused-MoE term (Profile::routed_experts, models/latency/fused_moe.h) fitted from a bundle's
// moe.csv: one MoE layer's fused experts timed by token count and number of distinct experts
// activated. Every even row (0, 2, ... in file order) fits, every odd row is held out.
#pragma once

#include <filesystem>
#include <vector>

#include "models/latency/profile.h"

namespace kvsim::validate {

struct MoeRow {
  double tokens = 0, activated = 0, seconds = 0;
};
// moe.csv (tokens, activated_experts, time_us). Throws InputError with file:line on bad rows.
std::vector<MoeRow> read_moe_csv(const std::filesystem::path& path);

// The model's expert shapes on one GPU and the GPU's peaks the term is relative to.
struct MoeShape {
  double hidden = 0, expert_ffn = 0, topk = 1, bytes_per_weight = 2;
  double hbm_bytes_per_s = 0, flops_per_s = 0;
};

struct MoeFit {
  RoutedExpertsCost cost;
  std::vector<MoeRow> test;            // the held-out rows
  std::vector<double> test_predicted;  // seconds, one per test row
  double test_mape = 0;
  int train_rows = 0;
};

// Least squares on the relative errors of the train rows:
//   seconds = constant + a x weight bytes / HBM peak + b x FLOPs / tensor peak,
// weight bytes and FLOPs from routed_experts_work (rows = tokens x top-k); memory efficiency
// 1 / a, compute efficiency 1 / b. The constant is dropped when the fit makes it negative.
// Throws InputError with fewer than 3 train rows or when a or b comes out non-positive.
MoeFit fit_routed_experts(const std::vector<MoeRow>& rows, const MoeShape& shape,
                          const std::string& source);

}  // namespace kvsim::validate
