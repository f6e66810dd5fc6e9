// Where kernels run: the `cuda` backend (the kernels in kernels/*.cu, timed with CUDA events) or
// the `cpu` backend (the float implementations in kernels/cpu_ref, timed with std::chrono). Both
// go through the same pipeline (inputs, reference check, timing), so CI exercises every step of
// measure -> calibrate -> compare without a GPU.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/registry.h"
#include "kernels/cpu_ref/tolerance.h"
#include "validate/grid.h"
#include "validate/kernel_case.h"

#ifdef KVSIM_HAVE_CUDA
namespace kvsim::kernels::cuda {
struct DeviceInfo;
}  // namespace kvsim::kernels::cuda
#endif

namespace kvsim::validate {

// A case that cannot run on this backend (e.g. its workspace does not fit); measure records the
// reason and moves on.
class SkipCase : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Host inputs of one case, from a fixed seed, already rounded to the case's precision.
struct CaseInputs {
  std::vector<float> a, b, c;   // Q K V (attention), Q K-cache V-cache (paged), X W (gemm)
  std::vector<int32_t> table;   // paged block table
  std::vector<uint64_t> words;  // membw
};
CaseInputs make_case_inputs(const KernelCase& c, uint64_t seed);
// The double-precision reference output of `c` on `in` (attention_reference, the gathered paged
// reference, gemm_reference); {1} for membw (the round trip must succeed).
std::vector<float> reference_output(const KernelCase& c, const CaseInputs& in);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual std::string device_name() const = 0;
  // What the manifest records about the device (name, clocks, memory, versions).
  virtual nlohmann::ordered_json device_json() const = 0;
  // Runs `c` once on `in`; returns its output as floats ({1}/{0} for a membw round trip).
  virtual std::vector<float> run_for_check(const KernelCase& c, const CaseInputs& in) = 0;
  // Seconds per timed run. Throws SkipCase when `c` cannot run here.
  virtual std::vector<double> time(const KernelCase& c, const TimingOptions& t, uint64_t seed) = 0;
};

// The backend registry: `--backend NAME` names one of its entries. Every backend is registered
// whether or not this binary can run it (so `cuda` is a known name in a CPU-only build and its
// factory says why it cannot run). Adding a backend takes one add() in register_backends()
// (backend.cc).
struct BackendFactory {
  bool needs_device = false;  // needs an accelerator (its contract test is tagged [gpu])
  bool built = true;          // compiled into this binary
  std::function<std::unique_ptr<Backend>()> build;
};
using BackendRegistry = Registry<BackendFactory>;
void register_backends(BackendRegistry& registry);  // cpu, cuda
const BackendRegistry& backend_registry();

// A registered backend by name. Throws InputError for an unknown name (with the registered names
// and a did-you-mean hint), and when the CUDA backend was not built or no device is usable (the
// message says which and why).
std::unique_ptr<Backend> make_backend(const std::string& name);
// The entry named `name`; InputError (registered names, did-you-mean) when there is none.
const BackendRegistry::Entry& find_backend(const std::string& name);
// "cpu or cuda": the registered names, for help texts and messages.
std::string backend_names();
std::unique_ptr<Backend> make_cpu_backend();
#ifdef KVSIM_HAVE_CUDA
std::unique_ptr<Backend> make_cuda_backend();  // validate/cuda_backend.cc
#endif

// Runs `c` on the backend and compares with the reference under the per-dtype tolerance.
kernels::CheckReport check_case(Backend& backend, const KernelCase& c, uint64_t seed);

// Median, and the p-th percentile (0..100, linear interpolation) of samples. Requires: non-empty.
double percentile(std::vector<double> samples, double p);

#ifdef KVSIM_HAVE_CUDA
// A CUDA device's identity and peaks as JSON (cuda_backend.cc): the CUDA backend's device record
// in manifests, and `kvsim-validate device`.
nlohmann::ordered_json device_info_json(const kernels::cuda::DeviceInfo& info);
#endif

}  // namespace kvsim::validate
