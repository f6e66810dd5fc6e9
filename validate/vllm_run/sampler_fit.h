// The sampler's per-step cost fitted from a bundle's per_sequence.csv `sampler` rows (vLLM's
// sampler timed by the number of sequences that sample): time = a + b x sequences
// + c x max(0, sequences - L2 sequences), the form models/latency/sampler_cost.h charges, with
// the knee where the FP32 logits and probabilities outgrow L2 (sampler_l2_sequences). a joins
// the profile's per-step overhead, b is its per-sequence slope, c its slope past L2.
#pragma once

#include <utility>
#include <vector>

namespace kvsim::validate {

struct SamplerFit {
  double constant_us = 0, per_sequence_us = 0, past_l2_us = 0;
  double l2_sequences = 0;
  double us(double sequences) const;  // the fitted line at `sequences`
};

// Least squares on the relative errors of (sequences, microseconds) points. The slope past L2 is
// fitted only when at least two points lie past the knee and it comes out positive; otherwise
// it is 0 and the line a + b x sequences is fitted alone. Fewer than two points: all zero.
SamplerFit fit_sampler(const std::vector<std::pair<double, double>>& points, double l2_sequences);

}  // namespace kvsim::validate
