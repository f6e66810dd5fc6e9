// `kvsim-validate device`: is a CUDA device usable here, which one, and can cuBLAS be loaded.
// The run script (validate/run-on-gpu.sh) asks this first and runs the GPU steps only when the
// answer is yes, so a CPU machine gets one clear "no device" instead of a cascade of failures.
#include <fmt/format.h>

#include <cstdio>

#include "core/atomic_file.h"
#include "core/data_path.h"
#include "validate/backend.h"
#include "validate/commands.h"
#ifdef KVSIM_HAVE_CUDA
#include "kernels/cuda_api.h"
#endif

namespace kvsim::validate {

int run_device_query(const DeviceQueryOptions& o) {
  nlohmann::ordered_json j;
  j["kvsim_version"] = kvsim_version();
#ifdef KVSIM_HAVE_CUDA
  namespace cu = kernels::cuda;
  const cu::DeviceInfo info = cu::probe_device();
  j["cuda_built"] = true;
  j["available"] = info.available;
  if (!info.available) {
    j["why_not"] = info.why_not;
  } else {
    j.update(device_info_json(info));
  }
  j["cublas"] = cu::cublas_version();
#else
  j["cuda_built"] = false;
  j["available"] = false;
  j["why_not"] = "kvsim-validate was built without CUDA (KVSIM_WITH_CUDA=OFF or no nvcc)";
#endif
  const bool ok = j["available"].get<bool>();
  if (o.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else if (ok) {
    std::printf("device: %s (compute %s, %d SMs, %.1f GiB), driver %d, runtime %d, cuBLAS %s\n",
                j["name"].get<std::string>().c_str(),
                j["compute_capability"].get<std::string>().c_str(), j["sm_count"].get<int>(),
                j["total_bytes"].get<double>() / (1 << 30), j["driver_version"].get<int>(),
                j["runtime_version"].get<int>(), j["cublas"].get<std::string>().c_str());
  } else {
    std::printf(
        "no device: %s%s\n", j["why_not"].get<std::string>().c_str(),
        j.contains("cublas") ? (" (cuBLAS " + j["cublas"].get<std::string>() + ")").c_str() : "");
  }
  if (!o.out.empty()) write_file_atomic(o.out, j.dump(2) + "\n");
  return ok ? 0 : 1;
}

}  // namespace kvsim::validate
