#include "models/latency/sampler_cost.h"

namespace kvsim {

double sampler_l2_sequences(double l2_bytes, double vocab) {
  constexpr double kLiveArrays = 2;  // the FP32 logits and the probabilities computed from them
  constexpr double kFp32 = 4;
  if (!(l2_bytes > 0) || !(vocab > 0)) return 0.0;
  return l2_bytes / (kLiveArrays * kFp32 * vocab);
}

}  // namespace kvsim
