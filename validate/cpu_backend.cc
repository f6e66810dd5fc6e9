// The CPU backend: runs the float implementations of kernels/cpu_ref (the same algorithms as the
// CUDA kernels: materialised scores, tiled online softmax, block-table walk) and times them with
// std::chrono::steady_clock. There is no cache flush between samples; CPU figures say nothing
// about a GPU and are only there so the whole pipeline runs in CI.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "kernels/cpu_ref/attention_ref.h"
#include "kernels/cpu_ref/gemm_ref.h"
#include "kernels/cpu_ref/membw_ref.h"
#include "kernels/cpu_ref/paged_decode_ref.h"
#include "validate/backend.h"

namespace kvsim::validate {

namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

// Runs the case's CPU kernel once on `in`, writing into `out` (sized by the caller).
void run_kernel(const KernelCase& c, const CaseInputs& in, std::vector<float>& out,
                std::vector<uint64_t>& words_out, uint64_t& sink) {
  switch (c.kind) {
    case KernelClass::kNative: kernels::native_attention_cpu(c.attn, c.precision, in.a, in.b, in.c, out); break;
    case KernelClass::kFlash: kernels::flash_attention_cpu(c.attn, c.precision, in.a, in.b, in.c, out); break;
    case KernelClass::kPagedDecode:
      kernels::paged_decode_cpu(c.paged, c.precision, in.a, in.b, in.c, in.table, out);
      break;
    case KernelClass::kGemm: kernels::gemm_cpu(c.gemm, c.precision, in.a, in.b, out); break;
    case KernelClass::kMembwCopy: kernels::membw_copy_cpu(in.words, words_out); break;
    case KernelClass::kMembwRead: sink += kernels::membw_read_cpu(in.words); break;
  }
}

size_t output_size(const KernelCase& c, const CaseInputs& in) {
  switch (c.kind) {
    case KernelClass::kGemm: return static_cast<size_t>(c.gemm.m * c.gemm.n);
    case KernelClass::kMembwCopy:
    case KernelClass::kMembwRead: return 0;
    default: return in.a.size();
  }
}

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::string device_name() const override { return "CPU " + cpu_model_name(); }

  nlohmann::ordered_json device_json() const override {
    nlohmann::ordered_json j;
    j["backend"] = "cpu";
    j["name"] = device_name();
    j["threads_used"] = 1;
    j["hardware_threads"] = std::thread::hardware_concurrency();
    j["note"] = "CPU run: single-threaded float implementations of the kernels' algorithms; "
                "these figures are not GPU figures";
    return j;
  }

  std::vector<float> run_for_check(const KernelCase& c, const CaseInputs& in) override {
    std::vector<float> out(output_size(c, in));
    std::vector<uint64_t> words(in.words.size());
    uint64_t sink = 0;
    run_kernel(c, in, out, words, sink);
    if (c.kind == KernelClass::kMembwCopy) return {words == in.words ? 1.0f : 0.0f};
    if (c.kind == KernelClass::kMembwRead) return {sink == kernels::membw_read_cpu(in.words) ? 1.0f : 0.0f};
    return out;
  }

  std::vector<double> time(const KernelCase& c, const TimingOptions& t, uint64_t seed) override {
    const CaseInputs in = make_case_inputs(c, seed);
    std::vector<float> out(output_size(c, in));
    std::vector<uint64_t> words(in.words.size());
    uint64_t sink = 0;
    for (int i = 0; i < t.warmup; ++i) run_kernel(c, in, out, words, sink);
    std::vector<double> seconds;
    for (int i = 0; i < t.repetitions; ++i) {
      const auto start = std::chrono::steady_clock::now();
      run_kernel(c, in, out, words, sink);
      const auto stop = std::chrono::steady_clock::now();
      seconds.push_back(std::chrono::duration<double>(stop - start).count());
    }
    // Keep the read probe's sum observable so the loop is not optimised away.
    if (sink == 0x5eed) fmt::print(stderr, " ");
    return seconds;
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace kvsim::validate
