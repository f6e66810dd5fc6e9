// The CUDA backend: the kernels of kernels/*.cu on device 0, inputs filled on the device from the
// grid's seed, timed with CUDA events (warm-up, repetitions, an L2 flush before each sample).
// Built only when nvcc was found (KVSIM_HAVE_CUDA).
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "core/errors.h"
#include "kernels/cpu_ref/paged_decode_ref.h"
#include "kernels/cuda_api.h"
#include "validate/backend.h"

namespace kvsim::validate {

nlohmann::ordered_json device_info_json(const kernels::cuda::DeviceInfo& info) {
  nlohmann::ordered_json j;
  j["name"] = info.name;
  j["compute_capability"] = fmt::format("{}.{}", info.cc_major, info.cc_minor);
  j["sm_count"] = info.sm_count;
  j["sm_clock_mhz"] = info.sm_clock_khz / 1000.0;
  j["mem_clock_mhz"] = info.mem_clock_khz / 1000.0;
  j["mem_bus_bits"] = info.mem_bus_bits;
  j["total_bytes"] = info.total_bytes;
  j["l2_bytes"] = info.l2_bytes;
  j["driver_version"] = info.driver_version;
  j["runtime_version"] = info.runtime_version;
  return j;
}

namespace {

namespace cu = kernels::cuda;

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(cu::DeviceInfo info) : info_(std::move(info)) {}

  std::string name() const override { return "cuda"; }
  std::string device_name() const override { return info_.name; }

  nlohmann::ordered_json device_json() const override {
    nlohmann::ordered_json j;
    j["backend"] = "cuda";
    j.update(device_info_json(info_));
    return j;
  }

  // The CUDA kernels are instantiated for FP16 and BF16 only; fp32 cases calibrate the CPU
  // forward pass (validate/replay/e2e_grid.cc).
  static void skip_fp32(const KernelCase& c) {
    if (c.precision == kernels::Precision::kFp32) throw SkipCase("fp32 kernels are CPU-only");
  }

  std::vector<float> run_for_check(const KernelCase& c, const CaseInputs& in) override {
    skip_fp32(c);
    switch (c.kind) {
      case KernelClass::kNative:
        return cu::run_native_attention(c.version, c.attn, c.precision, in.a, in.b, in.c);
      case KernelClass::kFlash:
        return cu::run_flash_attention(c.version, c.attn, c.precision, in.a, in.b, in.c);
      case KernelClass::kPagedDecode:
        return cu::run_paged_decode(c.version, c.paged, c.precision, in.a, in.b, in.c, in.table);
      case KernelClass::kGemm: return cu::run_gemm(c.version, c.gemm, c.precision, in.a, in.b);
      case KernelClass::kMembwCopy:
      case KernelClass::kMembwRead:
        return {cu::run_membw_roundtrip(c.version, in.words) ? 1.0f : 0.0f};
    }
    return {};
  }

  std::vector<double> time(const KernelCase& c, const TimingOptions& t, uint64_t seed) override {
    skip_fp32(c);
    const int64_t e = kernels::precision_bytes(c.precision);
    std::vector<int64_t> sizes;  // device buffers of the case, in bytes
    switch (c.kind) {
      case KernelClass::kNative:
      case KernelClass::kFlash:
        sizes = {c.attn.q_elements() * e, c.attn.kv_elements() * e, c.attn.kv_elements() * e,
                 c.attn.q_elements() * e, c.workspace_bytes()};
        break;
      case KernelClass::kPagedDecode: {
        const int64_t q = c.paged.batch * c.paged.heads * c.paged.head_dim * e;
        sizes = {q, c.paged.cache_elements() * e, c.paged.cache_elements() * e, q,
                 c.paged.num_blocks() * 4};
        break;
      }
      case KernelClass::kGemm:
        sizes = {c.gemm.m * c.gemm.k * e, c.gemm.n * c.gemm.k * e, c.gemm.m * c.gemm.n * e};
        break;
      case KernelClass::kMembwCopy: sizes = {c.bytes, c.bytes}; break;
      case KernelClass::kMembwRead: sizes = {c.bytes, 8}; break;
    }
    int64_t total = 0;
    for (int64_t s : sizes) total += s;
    const cu::MemInfo mem = cu::mem_get_info();
    if (static_cast<double>(total) > 0.9 * static_cast<double>(mem.free_bytes)) {
      throw SkipCase(
          fmt::format("needs {} bytes of device memory, {} free", total, mem.free_bytes));
    }
    std::vector<cu::DeviceBuffer> buf;
    for (int64_t s : sizes) buf.emplace_back(std::max<int64_t>(s, 16));
    std::function<void()> run;
    switch (c.kind) {
      case KernelClass::kNative:
      case KernelClass::kFlash:
        for (int i = 0; i < 3; ++i) {
          cu::fill_random(buf[static_cast<size_t>(i)].get(), sizes[static_cast<size_t>(i)] / e,
                          c.precision, seed + static_cast<uint64_t>(i));
        }
        if (c.kind == KernelClass::kNative) {
          run = [&] {
            cu::native_attention(c.version, c.attn, c.precision, buf[0].get(), buf[1].get(),
                                 buf[2].get(), buf[3].get(), buf[4].get());
          };
        } else {
          run = [&] {
            cu::flash_attention(c.version, c.attn, c.precision, buf[0].get(), buf[1].get(),
                                buf[2].get(), buf[3].get());
          };
        }
        break;
      case KernelClass::kPagedDecode: {
        for (int i = 0; i < 3; ++i) {
          cu::fill_random(buf[static_cast<size_t>(i)].get(), sizes[static_cast<size_t>(i)] / e,
                          c.precision, seed + static_cast<uint64_t>(i));
        }
        kernels::InputRng rng(seed);
        const std::vector<int32_t> table = kernels::shuffled_block_table(c.paged, rng);
        buf[4].upload(table.data(), static_cast<int64_t>(table.size() * sizeof(int32_t)));
        run = [&] {
          cu::paged_decode(c.version, c.paged, c.precision, buf[0].get(), buf[1].get(),
                           buf[2].get(), static_cast<const int32_t*>(buf[4].get()), buf[3].get());
        };
        break;
      }
      case KernelClass::kGemm:
        cu::fill_random(buf[0].get(), sizes[0] / e, c.precision, seed);
        cu::fill_random(buf[1].get(), sizes[1] / e, c.precision, seed + 1);
        run = [&] {
          cu::gemm(c.version, c.gemm, c.precision, buf[0].get(), buf[1].get(), buf[2].get());
        };
        break;
      case KernelClass::kMembwCopy:
        cu::fill_random(buf[0].get(), c.bytes / 2, kernels::Precision::kFp16, seed);
        run = [&] { cu::membw_copy(c.version, buf[0].get(), buf[1].get(), c.bytes); };
        break;
      case KernelClass::kMembwRead:
        cu::fill_random(buf[0].get(), c.bytes / 2, kernels::Precision::kFp16, seed);
        buf[1].fill_zero();
        run = [&] {
          cu::membw_read(c.version, buf[0].get(), c.bytes, static_cast<uint64_t*>(buf[1].get()));
        };
        break;
    }
    cu::synchronize();
    std::vector<double> seconds = cu::time_with_events(run, t.warmup, t.repetitions, t.flush_l2);
    cu::synchronize();
    return seconds;
  }

 private:
  cu::DeviceInfo info_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() {
  cu::DeviceInfo info = cu::probe_device();
  if (!info.available) {
    throw InputError("--backend cuda: no usable CUDA device (" + info.why_not + ")");
  }
  cu::init_libraries();
  return std::make_unique<CudaBackend>(std::move(info));
}

}  // namespace kvsim::validate
