#include "validate/kernel_case.h"

#include <fmt/format.h>

#include "core/errors.h"
#include "kernels/cpu_ref/attention_ref.h"

namespace kvsim::validate {

std::string_view class_name(KernelClass k) {
  switch (k) {
    case KernelClass::kNative: return "native";
    case KernelClass::kFlash: return "flash";
    case KernelClass::kPagedDecode: return "paged_decode";
    case KernelClass::kMembwCopy: return "membw_copy";
    case KernelClass::kMembwRead: return "membw_read";
    case KernelClass::kGemm: return "gemm";
  }
  return "?";
}

KernelClass parse_class(std::string_view name) {
  for (KernelClass k : kAllClasses) {
    if (class_name(k) == name) return k;
  }
  throw InputError(
      fmt::format("unknown kernel class \"{}\"; expected one of native, flash, "
                  "paged_decode, membw_copy, membw_read, gemm",
                  name));
}

std::string op_name(KernelClass k) {
  if (k == KernelClass::kMembwCopy || k == KernelClass::kMembwRead) return "membw";
  return std::string(class_name(k));
}

double KernelCase::flops() const {
  const auto& a = attn;
  switch (kind) {
    case KernelClass::kNative:
      return 4.0 * static_cast<double>(a.batch * a.heads) * static_cast<double>(a.seq_q) *
             static_cast<double>(a.seq_kv) * static_cast<double>(a.head_dim);
    case KernelClass::kFlash:
      return 4.0 * static_cast<double>(a.visible_pairs()) * static_cast<double>(a.head_dim);
    case KernelClass::kPagedDecode:
      return 4.0 * static_cast<double>(paged.batch * paged.heads) *
             static_cast<double>(paged.context) * static_cast<double>(paged.head_dim);
    case KernelClass::kGemm:
      return 2.0 * static_cast<double>(gemm.m) * static_cast<double>(gemm.n) *
             static_cast<double>(gemm.k);
    case KernelClass::kMembwCopy:
    case KernelClass::kMembwRead: return 0.0;
  }
  return 0.0;
}

double KernelCase::bytes_moved() const {
  const double e = kernels::precision_bytes(precision);
  switch (kind) {
    case KernelClass::kNative:
    case KernelClass::kFlash: {
      double b = e * (2.0 * static_cast<double>(attn.q_elements()) +
                      2.0 * static_cast<double>(attn.kv_elements()));
      if (kind == KernelClass::kNative) b += 4.0 * static_cast<double>(workspace_bytes());
      return b;
    }
    case KernelClass::kPagedDecode: {
      const auto& p = paged;
      return e * (2.0 * static_cast<double>(p.batch * p.kv_heads) * static_cast<double>(p.context) *
                      static_cast<double>(p.head_dim) +
                  2.0 * static_cast<double>(p.batch * p.heads * p.head_dim)) +
             4.0 * static_cast<double>(p.batch * p.blocks_per_seq());
    }
    case KernelClass::kGemm:
      return e * (static_cast<double>(gemm.m * gemm.k) + static_cast<double>(gemm.n * gemm.k) +
                  static_cast<double>(gemm.m * gemm.n));
    case KernelClass::kMembwCopy: return 2.0 * static_cast<double>(bytes);
    case KernelClass::kMembwRead: return static_cast<double>(bytes);
  }
  return 0.0;
}

int64_t KernelCase::workspace_bytes() const {
  return kind == KernelClass::kNative ? kernels::native_attention_workspace_bytes(attn, precision)
                                      : 0;
}

std::string KernelCase::describe() const {
  std::string shape;
  switch (kind) {
    case KernelClass::kNative:
    case KernelClass::kFlash: shape = attn.describe(); break;
    case KernelClass::kPagedDecode: shape = paged.describe(); break;
    case KernelClass::kGemm: shape = gemm.describe(); break;
    case KernelClass::kMembwCopy:
    case KernelClass::kMembwRead: shape = fmt::format("bytes={}", bytes); break;
  }
  if (kind == KernelClass::kMembwCopy || kind == KernelClass::kMembwRead) {
    return fmt::format("{} v{} {}", class_name(kind), version, shape);
  }
  return fmt::format("{} v{} {} {}", class_name(kind), version, kernels::precision_name(precision),
                     shape);
}

void KernelCase::validate() const {
  switch (kind) {
    case KernelClass::kNative:
    case KernelClass::kFlash: attn.validate(); break;
    case KernelClass::kPagedDecode: paged.validate(); break;
    case KernelClass::kGemm: gemm.validate(); break;
    case KernelClass::kMembwCopy:
    case KernelClass::kMembwRead:
      if (bytes <= 0 || bytes % 1024 != 0) {
        throw InputError(fmt::format("{}: bytes must be a positive multiple of 1024, got {}",
                                     class_name(kind), bytes));
      }
      break;
  }
}

}  // namespace kvsim::validate
