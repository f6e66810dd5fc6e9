// The sampler's cost by the number of sequences that sample in a step.
//
// vLLM V1's sampler (`vllm/v1/sample/sampler.py`, `Sampler.forward`) converts the logits of the
// sampling sequences to FP32 (sequences x vocabulary x 4 bytes), applies the temperature, top-k
// and top-p (`vllm/v1/sample/ops/topk_topp_sampler.py`), takes the softmax and samples with
// exponential noise over the probabilities (`random_sample`): every step a pass over the whole
// sequences x vocabulary array. Under tensor parallelism the logits are gathered to the full
// vocabulary before it (`LogitsProcessor._gather_logits`), so the sampler sees the model's whole
// vocabulary on every GPU. While the FP32 logits and the probabilities computed from them (two
// arrays of sequences x vocabulary x 4 bytes) fit in L2, the passes after the first read L2;
// beyond that count each further sequence's passes read HBM, and its time per sequence rises
// (measured in LLMServingSim's per_sequence.csv: on an RTX PRO 6000, Llama-3.1-8B, 0.27 us a
// sequence up to about 128 sequences, 0.9 us beyond; docs/fidelity.md).
#pragma once

#include "models/latency/profile.h"

namespace kvsim {

// How many sequences' FP32 logits and probabilities (2 x vocab x 4 bytes each) fit in `l2_bytes`
// of L2; 0 when the GPU has no L2 figure or the model no vocabulary.
double sampler_l2_sequences(double l2_bytes, double vocab);

// A step's cost outside its kernels: the profile's per-step overhead, its per-sequence slope for
// each of the `sequences` that sample, and its slope beyond L2 for each past `l2_sequences`.
inline double step_overhead_seconds(const Profile& p, double sequences, double l2_sequences) {
  const double beyond = sequences > l2_sequences ? sequences - l2_sequences : 0.0;
  return p.iteration_overhead_s + p.per_sequence_overhead_s * sequences +
         p.per_sequence_past_l2_s * beyond;
}

}  // namespace kvsim
