// A real transformer forward pass as an IterationClock: each iteration's batch (prefill chunks and
// decode tokens, ClockBatch) runs through an actual Llama-shaped forward pass with random weights
// over a real paged KV pool holding real K and V values, and the clock returns its measured wall
// time. `kvsim-validate replay` gives one to the engine in place of the latency model
// (docs/fidelity.md "End to end"). Backends:
//   cpu   Eigen GEMMs and Eigen-tiled paged attention, float32             (cpu_forward.cc)
//   cuda  cuBLAS GEMMs and the kernels/*.cu attention kernels, fp16/bf16     (cuda_forward.cu)
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "models/model_spec.h"
#include "sim/serving/iteration_clock.h"

namespace kvsim::validate {

struct ForwardSetup {
  ModelSpec model;         // the whole model (one GPU: no tensor or pipeline split)
  int block_tokens = 16;   // paged KV block size in tokens (the scenario's store)
  int64_t num_blocks = 0;  // blocks in the real KV pool (the simulated pool's block count)
  uint64_t seed = 1;       // weights, inputs and filled KV come from it
  int repeats = 1;         // timed executions per iteration; the clock returns their median
  int threads = 1;         // CPU threads for the GEMMs (cpu backend)
};

// Throws InputError when the setup cannot run here (the pool or the weights do not fit in the
// memory the backend allows, or, for cuda, no device or a build without CUDA): one line saying
// which and why.
std::unique_ptr<IterationClock> make_cpu_forward(const ForwardSetup& setup);
std::unique_ptr<IterationClock> make_cuda_forward(const ForwardSetup& setup);
// The forward pass `backend` names ("cpu" or "cuda"); InputError for any other name. The one
// place `--backend` of replay and e2e is read.
std::unique_ptr<IterationClock> make_forward(const std::string& backend, const ForwardSetup& setup);
// Throws that InputError for a name make_forward does not know (checked before any work starts).
void check_forward_backend(const std::string& backend);

}  // namespace kvsim::validate
