// PLACEHOLDER (branch h21e2e): lets `kvsim-validate e2e` link before h21replay's run_replay and
// h21cpu's make_cpu_forward are merged. The lead takes h21replay's replay.cc at merge, which drops
// this file and its weak make_cpu_forward and make_cuda_forward (a strong definition in cpu_forward.cc wins anyway).
#include "validate/replay/replay.h"

#include "core/errors.h"

namespace kvsim::validate {

void run_replay(const ReplayOptions&) { throw InputError("replay not built yet"); }

__attribute__((weak)) std::unique_ptr<IterationClock> make_cpu_forward(const ForwardSetup&) {
  throw InputError("--backend cpu: the CPU forward pass is not built yet");
}

#ifdef KVSIM_HAVE_CUDA
// forward_pass.cc defines it only without CUDA; with nvcc, cuda_forward.cu (h21cuda) does.
__attribute__((weak)) std::unique_ptr<IterationClock> make_cuda_forward(const ForwardSetup&) {
  throw InputError("--backend cuda: the CUDA forward pass is not built yet");
}
#endif

}  // namespace kvsim::validate
