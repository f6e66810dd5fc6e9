// PLACEHOLDER (branch h21replay): lets kvsim-validate link until the real forward passes of
// issue 21 land: branch h21cpu's cpu_forward.cc replaces this file at merge, and branch h21cuda's
// cuda_forward.cu brings make_cuda_forward to CUDA builds (forward_pass.cc has the no-CUDA one).
#include "core/errors.h"
#include "validate/replay/forward_pass.h"

namespace kvsim::validate {

std::unique_ptr<IterationClock> make_cpu_forward(const ForwardSetup&) {
  throw InputError("--backend cpu: the CPU forward pass is not built yet");
}

#ifdef KVSIM_HAVE_CUDA
std::unique_ptr<IterationClock> make_cuda_forward(const ForwardSetup&) {
  throw InputError("--backend cuda: the CUDA forward pass is not built yet");
}
#endif

}  // namespace kvsim::validate
