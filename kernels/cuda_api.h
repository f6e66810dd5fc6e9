// The host-side interface of the CUDA kernels (kvsim_kernels_cuda). Plain C++: callers compiled
// by the host compiler (validate/, tests/) include it without CUDA headers. Every pointer passed
// to a launcher is a device pointer to elements of the given Precision (int32 for block tables);
// launches go to the default stream and return without synchronising. Errors throw CudaError
// with the failing call's text; an unknown version throws InputError.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu_ref/precision.h"
#include "kernels/cpu_ref/shapes.h"

namespace kvsim::kernels::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- device and runtime (device.cu) -------------------------------------------------------
struct DeviceInfo {
  bool available = false;
  std::string why_not;  // set when !available, e.g. "cudaGetDeviceCount: no CUDA-capable device"
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int sm_clock_khz = 0;   // peak, from cudaDevAttrClockRate
  int mem_clock_khz = 0;  // peak, from cudaDevAttrMemoryClockRate
  int mem_bus_bits = 0;
  int64_t total_bytes = 0;
  int64_t l2_bytes = 0;
  int driver_version = 0;  // e.g. 13000
  int runtime_version = 0;
};
// Never throws: a machine without a usable GPU gets available == false and the reason.
// Creates the CUDA context on device 0 when one is present.
DeviceInfo probe_device();
// The cuBLAS library's version, e.g. "13.0.2", or "unavailable: <status>" when it cannot be used
// (the bundle build loads it at run time: kernels/cublas_dlopen.cc). Never throws; needs no device.
std::string cublas_version();

struct MemInfo {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};
MemInfo mem_get_info();  // cudaMemGetInfo on the current device

// Owns one cudaMalloc'd buffer. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(int64_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  int64_t bytes() const { return bytes_; }
  void upload(const void* src, int64_t bytes);  // Requires: bytes <= this->bytes()
  void download(void* dst, int64_t bytes) const;
  void fill_zero();

 private:
  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
};

// cudaMalloc/cudaFree without an owner, for memprobe's allocate/free patterns. try_alloc
// returns nullptr (and clears the error) when the device is out of memory.
void* try_alloc(int64_t bytes);
void free_device(void* ptr);

void synchronize();  // cudaDeviceSynchronize, then the launch error check

// Times `fn` with CUDA events around each run: `warmup` untimed runs, then `reps` timed ones.
// With flush_l2, a memset over twice the L2 size runs before each timed run, outside the timed
// region, so every sample starts with a cold cache. Returns seconds per timed run.
std::vector<double> time_with_events(const std::function<void()>& fn, int warmup, int reps,
                                     bool flush_l2);

// Fills `elements` values of precision `p` with a hash of (seed, index), uniform in [-1, 1): timing
// inputs for shapes too large to generate on the host.
void fill_random(void* dst, int64_t elements, Precision p, uint64_t seed);

// Creates the cuBLAS/cuBLASLt handles (and their workspace) now rather than at the first GEMM, so
// memprobe can see what they cost.
void init_libraries();

// ---- kernels: one .cu per operation, each with a launch(version) switch ------------------
// native_attention.cu: v1 cuBLAS strided-batched GEMMs + our row softmax over a materialised
// score matrix in `workspace` (native_attention_workspace_bytes(),
// kernels/cpu_ref/attention_ref.h).
void native_attention(int version, const AttentionShape& s, Precision p, const void* q,
                      const void* k, const void* v, void* o, void* workspace);
// flash_attention.cu: v1 one thread per query row (scalar, a cross-check), v2 64x64 tiles on
// tensor cores (wmma) with an online softmax.
void flash_attention(int version, const AttentionShape& s, Precision p, const void* q,
                     const void* k, const void* v, void* o);
// paged_decode.cu: v1 one block per (sequence, query head), 16-byte loads per thread, token
// groups with private online softmax states merged at the end.
void paged_decode(int version, const PagedDecodeShape& s, Precision p, const void* q,
                  const void* k_cache, const void* v_cache, const int32_t* block_table, void* o);
// The same kernel over sequences of different lengths (vLLM's paged_attention with seq_lens):
// sequence b has contexts[b] tokens (a device array, each at least 1), its block table at
// block_tables + b * table_stride, its query heads at q + b * q_stride and its output heads at
// o + b * o_stride (in elements; strides multiples of 8, for the kernel's 16-byte loads).
struct PagedDecodeVarlenShape {
  int64_t batch = 1;
  int64_t heads = 1;
  int64_t kv_heads = 1;
  int64_t head_dim = 128;
  int64_t block_size = 16;
  int64_t table_stride = 1;  // block-table entries between two sequences
  int64_t q_stride = 0;      // elements between two sequences' query rows (>= heads * head_dim)
  int64_t o_stride = 0;      // elements between two sequences' output rows (>= heads * head_dim)
};
void paged_decode_varlen(int version, const PagedDecodeVarlenShape& s, Precision p, const void* q,
                         const void* k_cache, const void* v_cache, const int32_t* block_tables,
                         const int32_t* contexts, void* o);
// membw.cu: v1 grid-stride 16-byte copy / read. `bytes` must be a multiple of 16. The read
// kernel adds every 64-bit word (wrapping) into *sink (caller zeroes it), the checksum
// membw_read_cpu computes.
void membw_copy(int version, const void* src, void* dst, int64_t bytes);
void membw_read(int version, const void* src, int64_t bytes, uint64_t* sink);
// gemm.cu: Y = X W^T at linear-layer shapes (kernels/cpu_ref/gemm_ref.h), FP32 accumulation:
// v1 cublasGemmEx, v2 cublasLtMatmul with the heuristic's first algorithm.
void gemm(int version, const GemmShape& s, Precision p, const void* x, const void* w, void* y);

// The versions each operation has ("native", "flash", "paged_decode", "membw", "gemm").
std::vector<int> versions(const std::string& op);

}  // namespace kvsim::kernels::cuda

namespace kvsim::kernels::cuda {

// ---- host conveniences (host_runners.cu): upload host inputs (floats already rounded to `p`),
// run once, synchronise, and return the output as floats. For correctness checks, not timing.
std::vector<float> run_native_attention(int version, const AttentionShape& s, Precision p,
                                        const std::vector<float>& q, const std::vector<float>& k,
                                        const std::vector<float>& v);
std::vector<float> run_flash_attention(int version, const AttentionShape& s, Precision p,
                                       const std::vector<float>& q, const std::vector<float>& k,
                                       const std::vector<float>& v);
std::vector<float> run_paged_decode(int version, const PagedDecodeShape& s, Precision p,
                                    const std::vector<float>& q, const std::vector<float>& k_cache,
                                    const std::vector<float>& v_cache,
                                    const std::vector<int32_t>& block_table);
// Q, the caches and the tables as paged_decode_varlen reads them (q: batch * q_stride elements);
// returns batch * o_stride elements, zero where no head was written.
std::vector<float> run_paged_decode_varlen(int version, const PagedDecodeVarlenShape& s,
                                           Precision p, const std::vector<float>& q,
                                           const std::vector<float>& k_cache,
                                           const std::vector<float>& v_cache,
                                           const std::vector<int32_t>& block_tables,
                                           const std::vector<int32_t>& contexts);
std::vector<float> run_gemm(int version, const GemmShape& s, Precision p,
                            const std::vector<float>& x, const std::vector<float>& w);
// Copies `words` through membw_copy and reads it through membw_read; returns true when the copy
// is exact and the checksum equals membw_read_cpu's.
bool run_membw_roundtrip(int version, const std::vector<uint64_t>& words);

}  // namespace kvsim::kernels::cuda
