#include "validate/backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/errors.h"
#include "kernels/cpu_ref/attention_ref.h"
#include "kernels/cpu_ref/gemm_ref.h"
#include "kernels/cpu_ref/paged_decode_ref.h"
#include "kernels/cpu_ref/random_inputs.h"

namespace kvsim::validate {

CaseInputs make_case_inputs(const KernelCase& c, uint64_t seed) {
  kernels::InputRng rng(seed);
  const kernels::Precision p = c.precision;
  CaseInputs in;
  switch (c.kind) {
    case KernelClass::kNative:
    case KernelClass::kFlash:
      in.a = kernels::random_values(rng, c.attn.q_elements(), p);
      in.b = kernels::random_values(rng, c.attn.kv_elements(), p);
      in.c = kernels::random_values(rng, c.attn.kv_elements(), p);
      break;
    case KernelClass::kPagedDecode:
      in.a = kernels::random_values(rng, c.paged.batch * c.paged.heads * c.paged.head_dim, p);
      in.b = kernels::random_values(rng, c.paged.cache_elements(), p);
      in.c = kernels::random_values(rng, c.paged.cache_elements(), p);
      in.table = kernels::shuffled_block_table(c.paged, rng);
      break;
    case KernelClass::kGemm:
      in.a = kernels::random_values(rng, c.gemm.m * c.gemm.k, p);
      in.b = kernels::random_values(rng, c.gemm.n * c.gemm.k, p);
      break;
    case KernelClass::kMembwCopy:
    case KernelClass::kMembwRead:
      in.words.resize(static_cast<size_t>(c.bytes / 8));
      for (uint64_t& w : in.words) w = rng.next_u64();
      break;
  }
  return in;
}

std::vector<float> reference_output(const KernelCase& c, const CaseInputs& in) {
  std::vector<float> out;
  switch (c.kind) {
    case KernelClass::kNative:
    case KernelClass::kFlash:
      out.resize(in.a.size());
      kernels::attention_reference(c.attn, in.a, in.b, in.c, out);
      break;
    case KernelClass::kPagedDecode:
      out.resize(in.a.size());
      kernels::paged_decode_reference(c.paged, in.a, in.b, in.c, in.table, out);
      break;
    case KernelClass::kGemm:
      out.resize(static_cast<size_t>(c.gemm.m * c.gemm.n));
      kernels::gemm_reference(c.gemm, in.a, in.b, out);
      break;
    case KernelClass::kMembwCopy:
    case KernelClass::kMembwRead: out = {1.0f}; break;
  }
  return out;
}

kernels::CheckReport check_case(Backend& backend, const KernelCase& c, uint64_t seed) {
  const CaseInputs in = make_case_inputs(c, seed);
  const std::vector<float> got = backend.run_for_check(c, in);
  const std::vector<float> ref = reference_output(c, in);
  if (c.kind == KernelClass::kMembwCopy || c.kind == KernelClass::kMembwRead) {
    return kernels::check_close(ref, got, {.atol = 0, .rtol = 0});  // exact
  }
  return kernels::check_close(ref, got, kernels::tolerance_for(c.precision));
}

double percentile(std::vector<double> samples, double p) {
  KVSIM_CHECK(!samples.empty(), "percentile of no samples");
  std::sort(samples.begin(), samples.end());
  const double pos = p / 100.0 * static_cast<double>(samples.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (samples[hi] - samples[lo]) * (pos - static_cast<double>(lo));
}

void register_backends(BackendRegistry& r) {
  r.add({"cpu",
         "the float CPU references (kernels/cpu_ref), timed with std::chrono",
         {},
         {.needs_device = false, .built = true, .build = make_cpu_backend}});
#ifdef KVSIM_HAVE_CUDA
  r.add({"cuda",
         "the CUDA kernels (kernels/*.cu), timed with CUDA events",
         {},
         {.needs_device = true, .built = true, .build = make_cuda_backend}});
#else
  r.add({"cuda",
         "the CUDA kernels (kernels/*.cu), timed with CUDA events",
         {},
         {.needs_device = true, .built = false, .build = []() -> std::unique_ptr<Backend> {
            throw InputError(
                "--backend cuda: this kvsim-validate was built without CUDA "
                "(configure with nvcc on PATH and -DKVSIM_WITH_CUDA=ON)");
          }}});
#endif
}

const BackendRegistry& backend_registry() {
  static const BackendRegistry registry = BackendRegistry::filled("backend", register_backends);
  return registry;
}

std::string backend_names() { return or_list(backend_registry().names()); }

const BackendRegistry::Entry& find_backend(const std::string& name) {
  if (const auto* e = backend_registry().find(name)) return *e;
  std::string hint;
  if (auto near = nearest_name(name, backend_registry().names())) {
    hint = fmt::format("; did you mean '{}'?", *near);
  }
  throw InputError(
      fmt::format("unknown backend \"{}\"; expected {}{}", name, backend_names(), hint));
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  return find_backend(name).make.build();
}

}  // namespace kvsim::validate
