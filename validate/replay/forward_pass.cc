#include "validate/replay/forward_pass.h"

#include <fmt/format.h>

#include "core/errors.h"

namespace kvsim::validate {

void check_forward_backend(const std::string& backend) {
  if (backend != "cpu" && backend != "cuda") {
    throw InputError(fmt::format("--backend: expected cpu or cuda, got \"{}\"", backend));
  }
}

std::unique_ptr<IterationClock> make_forward(const std::string& backend,
                                             const ForwardSetup& setup) {
  check_forward_backend(backend);
  return backend == "cuda" ? make_cuda_forward(setup) : make_cpu_forward(setup);
}

#ifndef KVSIM_HAVE_CUDA
// A build without nvcc has no CUDA forward pass (cuda_forward.cu defines it otherwise).
std::unique_ptr<IterationClock> make_cuda_forward(const ForwardSetup&) {
  throw InputError("--backend cuda: this kvsim-validate was built without CUDA (nvcc not found)");
}
#endif

}  // namespace kvsim::validate
