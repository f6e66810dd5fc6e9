// Device discovery, buffers, event timing and the library handles the kernels share.
// Versions: v1 (default stream, one device).
#include <algorithm>
#include <cstring>
#include <utility>

#include "core/errors.h"
#include "kernels/cuda_common.cuh"

namespace kvsim::kernels::cuda {

void throw_cuda(const char* expr, const char* file, int line, const std::string& msg) {
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " + msg);
}

void throw_bad_version(const char* op, int version) {
  std::string have;
  for (int v : versions(op)) have += (have.empty() ? "v" : ", v") + std::to_string(v);
  throw InputError(std::string(op) + ": unknown kernel version " + std::to_string(version) +
                   " (have " + have + ")");
}

std::vector<int> versions(const std::string& op) {
  if (op == "native") return {1};
  if (op == "flash") return {1, 2};
  if (op == "paged_decode") return {1};
  if (op == "membw") return {1};
  if (op == "gemm") return {1, 2};
  return {};
}

DeviceInfo probe_device() {
  DeviceInfo info;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    info.why_not = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    (void)cudaGetLastError();
    return info;
  }
  if (count == 0) {
    info.why_not = "cudaGetDeviceCount: no CUDA device";
    return info;
  }
  cudaDeviceProp prop{};
  if ((err = cudaSetDevice(0)) != cudaSuccess || (err = cudaFree(nullptr)) != cudaSuccess ||
      (err = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess) {
    info.why_not = std::string("device 0: ") + cudaGetErrorString(err);
    (void)cudaGetLastError();
    return info;
  }
  info.available = true;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.total_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info.l2_bytes = prop.l2CacheSize;
  // CUDA 13 dropped the clock fields from cudaDeviceProp; the attributes remain.
  (void)cudaDeviceGetAttribute(&info.sm_clock_khz, cudaDevAttrClockRate, 0);
  (void)cudaDeviceGetAttribute(&info.mem_clock_khz, cudaDevAttrMemoryClockRate, 0);
  (void)cudaDeviceGetAttribute(&info.mem_bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0);
  (void)cudaDriverGetVersion(&info.driver_version);
  (void)cudaRuntimeGetVersion(&info.runtime_version);
  return info;
}

std::string cublas_version() {
  int v[3] = {0, 0, 0};
  const libraryPropertyType props[3] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
  for (int i = 0; i < 3; ++i) {
    const cublasStatus_t st = cublasGetProperty(props[i], &v[i]);
    if (st != CUBLAS_STATUS_SUCCESS)
      return std::string("unavailable: ") + cublasGetStatusString(st);
  }
  return std::to_string(v[0]) + "." + std::to_string(v[1]) + "." + std::to_string(v[2]);
}

MemInfo mem_get_info() {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return {static_cast<int64_t>(free_b), static_cast<int64_t>(total_b)};
}

DeviceBuffer::DeviceBuffer(int64_t bytes) : bytes_(bytes) {
  if (bytes > 0) CUDA_CHECK(cudaMalloc(&ptr_, static_cast<size_t>(bytes)));
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) (void)cudaFree(ptr_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) (void)cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}
void DeviceBuffer::upload(const void* src, int64_t bytes) {
  if (bytes > bytes_)
    throw CudaError("upload of " + std::to_string(bytes) + " bytes into a buffer of " +
                    std::to_string(bytes_));
  CUDA_CHECK(cudaMemcpy(ptr_, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice));
}
void DeviceBuffer::download(void* dst, int64_t bytes) const {
  if (bytes > bytes_)
    throw CudaError("download of " + std::to_string(bytes) + " bytes from a buffer of " +
                    std::to_string(bytes_));
  CUDA_CHECK(cudaMemcpy(dst, ptr_, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost));
}
void DeviceBuffer::fill_zero() {
  if (ptr_) CUDA_CHECK(cudaMemset(ptr_, 0, static_cast<size_t>(bytes_)));
}

void* try_alloc(int64_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, static_cast<size_t>(bytes));
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear the sticky-free error so later calls are not blamed
    return nullptr;
  }
  CUDA_CHECK(err);
  return p;
}

void free_device(void* ptr) { CUDA_CHECK(cudaFree(ptr)); }

void synchronize() {
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaGetLastError());
}

std::vector<double> time_with_events(const std::function<void()>& fn, int warmup, int reps,
                                     bool flush_l2) {
  static DeviceBuffer flush_buffer;
  if (flush_l2 && flush_buffer.bytes() == 0) {
    int l2 = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    flush_buffer = DeviceBuffer(std::max<int64_t>(2 * int64_t{l2}, int64_t{8} << 20));
  }
  for (int i = 0; i < warmup; ++i) fn();
  CUDA_CHECK_LAUNCH();
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> seconds;
  try {
    for (int i = 0; i < reps; ++i) {
      if (flush_l2) {
        CUDA_CHECK(cudaMemsetAsync(flush_buffer.get(), i & 0xff,
                                   static_cast<size_t>(flush_buffer.bytes())));
      }
      CUDA_CHECK(cudaEventRecord(start));
      fn();
      CUDA_CHECK(cudaEventRecord(stop));
      CUDA_CHECK(cudaEventSynchronize(stop));
      CUDA_CHECK_LAUNCH();
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      seconds.push_back(static_cast<double>(ms) * 1e-3);
    }
  } catch (...) {
    (void)cudaEventDestroy(start);
    (void)cudaEventDestroy(stop);
    throw;
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return seconds;
}

// The handles live for the whole process: destroying them at exit would race the driver's own
// teardown, and the harness is single-threaded.
cublasHandle_t cublas_handle() {
  static cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    CUBLAS_CHECK(cublasCreate(&created));
    return created;
  }();
  return h;
}

cublasLtHandle_t cublaslt_handle() {
  static cublasLtHandle_t h = [] {
    cublasLtHandle_t created = nullptr;
    CUBLAS_CHECK(cublasLtCreate(&created));
    return created;
  }();
  return h;
}

void* cublaslt_workspace(size_t* bytes) {
  static constexpr size_t kBytes = size_t{32} << 20;
  static DeviceBuffer ws(kBytes);
  *bytes = kBytes;
  return ws.get();
}

namespace {

template <typename T>
__global__ void fill_random_kernel(T* dst, int64_t n, uint64_t seed) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    uint64_t z =
        seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1);  // SplitMix64 finaliser
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
    dst[i] = from_float<T>(2.0f * u - 1.0f);
  }
}

}  // namespace

void fill_random(void* dst, int64_t elements, Precision p, uint64_t seed) {
  if (elements <= 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((elements + 255) / 256, 65536));
  if (p == Precision::kFp16) {
    fill_random_kernel<<<blocks, 256>>>(static_cast<__half*>(dst), elements, seed);
  } else {
    fill_random_kernel<<<blocks, 256>>>(static_cast<__nv_bfloat16*>(dst), elements, seed);
  }
  CUDA_CHECK_LAUNCH();
}

void init_libraries() {
  (void)cublas_handle();
  (void)cublaslt_handle();
  size_t bytes = 0;
  (void)cublaslt_workspace(&bytes);
  synchronize();
}

}  // namespace kvsim::kernels::cuda
