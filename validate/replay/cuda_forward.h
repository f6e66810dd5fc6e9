// The CUDA forward pass (cuda_forward.cu) as its tests see it: the clock, the logits of its last
// iteration, and a way to run it on given weights, so tests/replay_cuda compares it with the CPU
// forward pass (cpu_forward.h) on the same model. Plain C++: host code includes it without CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "validate/replay/forward_pass.h"
#include "validate/replay/llama_weights.h"

namespace kvsim::validate {

// The clock make_cuda_forward returns, with what its tests look at.
class CudaForward : public IterationClock {
 public:
  // Logits of the last seconds() call's emitting rows, [rows, vocab] row-major, rows in batch
  // order (emitting prefill chunks, then decode sequences), as CpuForward::run returns them;
  // values as the device holds them (fp16), widened to float.
  virtual std::vector<float> last_logits() const = 0;
  // Logical KV blocks handed out beyond the pool (the engine shares prefix blocks that this pass
  // holds per request): they alias blocks in use, so their values are not that request's.
  virtual int64_t aliased_blocks() const = 0;
};

// weights == nullptr: drawn on the device from setup.seed, with the CPU pass's distributions
// (llama_weights.h: linear layers uniform with standard deviation 0.02, norm weights uniform in
// [0.9, 1.1]) but not its values (drawing 8 billion values on the host would take longer than the
// replay). Otherwise `weights`, rounded to fp16. Throws InputError as make_cuda_forward does.
std::unique_ptr<CudaForward> make_cuda_forward_pass(const ForwardSetup& setup,
                                                    const LlamaWeights* weights = nullptr);

}  // namespace kvsim::validate
