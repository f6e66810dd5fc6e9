// One point of a validation grid: which kernel, which version, which precision and shape, and what
// the harness does with it (check against the reference, train or test split of the fit).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/cpu_ref/precision.h"
#include "kernels/cpu_ref/shapes.h"

namespace kvsim::validate {

enum class KernelClass { kNative, kFlash, kPagedDecode, kMembwCopy, kMembwRead, kGemm };
inline constexpr KernelClass kAllClasses[] = {KernelClass::kNative,      KernelClass::kFlash,
                                              KernelClass::kPagedDecode, KernelClass::kMembwCopy,
                                              KernelClass::kMembwRead,   KernelClass::kGemm};

// "native", "flash", "paged_decode", "membw_copy", "membw_read", "gemm"
std::string_view class_name(KernelClass k);
// Throws InputError listing the valid names.
KernelClass parse_class(std::string_view name);
// The operation name of the CUDA launchers ("membw" for both probe classes).
std::string op_name(KernelClass k);

struct KernelCase {
  KernelClass kind = KernelClass::kFlash;
  int version = 1;
  kernels::Precision precision = kernels::Precision::kFp16;
  kernels::AttentionShape attn;     // native, flash
  kernels::PagedDecodeShape paged;  // paged_decode
  kernels::GemmShape gemm;          // gemm
  int64_t bytes = 0;                // membw_copy, membw_read: the buffer size
  // membw_copy as an elementwise kernel of the served model (import llmservingsim): its CTAs and
  // each thread's serial dependent loads, for the profile's latency terms (0: bytes only).
  double ctas = 0, serial_loads = 0;
  bool check = false;           // compare with the CPU reference before timing
  std::string split = "train";  // "train", "test" or "none" (the latency model has no term)

  // FLOPs the kernel's algorithm performs: native computes every (query, key) pair (masking
  // happens after QK^T), flash only the visible ones; 2 per multiply-add.
  double flops() const;
  // Bytes the algorithm must move through device memory at least once: inputs read, outputs
  // written, and for native the score matrix's four passes (QK^T write, softmax read + write,
  // PV read); for paged decode the block table too.
  double bytes_moved() const;
  // Device memory beyond inputs and outputs: native's score matrix, 0 otherwise.
  int64_t workspace_bytes() const;
  // "flash v2 fp16 B=1 H=32 Hkv=8 Sq=4096 Skv=4096 D=128 causal"
  std::string describe() const;
  // Throws InputError when the shape is invalid for the kind.
  void validate() const;
};

}  // namespace kvsim::validate
