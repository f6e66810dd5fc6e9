#include "validate/replay/forward_pass.h"

#include "core/errors.h"

namespace kvsim::validate {

#ifndef KVSIM_HAVE_CUDA
// A build without nvcc has no CUDA forward pass (cuda_forward.cu defines it otherwise).
std::unique_ptr<IterationClock> make_cuda_forward(const ForwardSetup&) {
  throw InputError("--backend cuda: this kvsim-validate was built without CUDA (nvcc not found)");
}
#endif

}  // namespace kvsim::validate
