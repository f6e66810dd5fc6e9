// PENDING (branch h21replay): a CUDA build links make_cuda_forward from cuda_forward.cu (branch
// h21cuda), not merged yet; until then this stands in so kvsim-validate links where nvcc is found.
// DELETE THIS FILE when cuda_forward.cu lands (both would define the function).
#include "core/errors.h"
#include "validate/replay/forward_pass.h"

namespace kvsim::validate {

#ifdef KVSIM_HAVE_CUDA
std::unique_ptr<IterationClock> make_cuda_forward(const ForwardSetup&) {
  throw InputError("--backend cuda: the CUDA forward pass is not built yet (cuda_forward.cu)");
}
#endif

}  // namespace kvsim::validate
