// CPU attention: a naive double-precision reference, and two float implementations that follow
// the GPU kernels' algorithms (the CPU backend times these through the same pipeline):
//   native  materialises the [batch*heads, seq_q, seq_kv] score matrix, softmax in place, then PV;
//           scores and probabilities are stored at the kernel's precision, as the GPU path stores
//           them in its workspace.
//   flash   walks KV in tiles with an online softmax and never holds more than one tile of
//           scores; probabilities are rounded to the kernel's precision before PV, as the tensor-
//           core kernel feeds them to the MMA.
// Layouts and masking: kernels/cpu_ref/shapes.h. Softmax scale 1/sqrt(head_dim).
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cpu_ref/precision.h"
#include "kernels/cpu_ref/shapes.h"

namespace kvsim::kernels {

// One query row at a time, double accumulation, no rounding. Requires: s.validate() passes and
// the spans hold q_elements / kv_elements / kv_elements / q_elements values.
void attention_reference(const AttentionShape& s, std::span<const float> q,
                         std::span<const float> k, std::span<const float> v, std::span<float> o);

// Returns the workspace it allocated: batch*heads*seq_q*seq_kv elements of `p`.
int64_t native_attention_cpu(const AttentionShape& s, Precision p, std::span<const float> q,
                             std::span<const float> k, std::span<const float> v,
                             std::span<float> o);
int64_t native_attention_workspace_bytes(const AttentionShape& s, Precision p);

// Tiles of `tile_q` x `tile_kv` (the GPU kernel uses 64 x 64).
void flash_attention_cpu(const AttentionShape& s, Precision p, std::span<const float> q,
                         std::span<const float> k, std::span<const float> v, std::span<float> o,
                         int64_t tile_q = 64, int64_t tile_kv = 64);

}  // namespace kvsim::kernels
