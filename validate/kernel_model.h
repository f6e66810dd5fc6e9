// How a measured kernel maps onto the simulator's latency model (models/latency): each kernel
// becomes one operation of a one-layer model whose shape is the kernel's, so the prediction is
// exactly the per-operation cost the simulator charges inside an iteration:
//   native / flash  -> "attention_prefill" of B prefill chunks of seq_q tokens with
//                      seq_kv - seq_q tokens of context (native / flash implementation)
//   paged_decode    -> "attention_decode" of B sequences of `context` tokens, block_size blocks
//   gemm (m, n, k)  -> "o_proj" of m tokens with q_heads x head_dim = k inputs, hidden = n
//   membw_copy      -> "embedding" (elementwise: read 2-byte rows, write 2-byte rows)
// Non-causal flash and membw_read have no operation in the model (prefill is causal; there is no
// read-only operation): they are measured but neither fitted nor compared.
#pragma once

#include <array>
#include <map>
#include <optional>

#include "models/gpu_spec.h"
#include "models/latency/latency_model.h"
#include "models/latency/profile.h"
#include "validate/kernel_case.h"

namespace kvsim::validate {

// The profile class a kernel's operation belongs to; nullopt when the model has no term for it.
std::optional<OpClass> model_class(const KernelCase& c);

// Seconds the latency model charges for kernels' operations under one profile. Each kernel shape's
// one-layer LatencyModel is built once and kept, so its memos (a cache of a pure function: the
// same bits) serve every case of that shape: a fresh model per case would size and fill its GEMM
// memo to the case's row count, making a fit's cost grow with the largest row count as well as
// the number of rows. Not shared between threads (the memos are not).
class KernelPredictor {
 public:
  KernelPredictor(const GpuSpec& gpu, const Profile& p) : gpu_(gpu), profile_(p) {}

  // Seconds of the kernel's operation; nullopt when unmodelled.
  std::optional<double> seconds(const KernelCase& c) const;

 private:
  // A one-layer model's shape: heads, KV heads, head_dim, hidden, precision, attention kind.
  using Shape = std::array<int, 6>;
  const LatencyModel& model(const Shape& s) const;

  const GpuSpec& gpu_;
  const Profile& profile_;
  mutable std::map<Shape, LatencyModel> models_;
};

// Seconds the latency model charges for the kernel's operation; nullopt when unmodelled. (One
// prediction: many under one profile are cheaper through one KernelPredictor.)
std::optional<double> predict_seconds(const KernelCase& c, const GpuSpec& gpu, const Profile& p);

}  // namespace kvsim::validate
