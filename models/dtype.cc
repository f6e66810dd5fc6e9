#include "models/dtype.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/errors.h"

namespace kvsim {

int dtype_bytes(DType t) {
  switch (t) {
    case DType::kFp32: return 4;
    case DType::kFp16:
    case DType::kBf16: return 2;
    case DType::kFp8:
    case DType::kInt8: return 1;
    case DType::kInt4:
    case DType::kMxfp4:
    case DType::kNvfp4: break;
  }
  KVSIM_CHECK(false, "dtype {} has no whole-byte size", dtype_name(t));
  return 0;
}

int dtype_bits(DType t) {
  return t == DType::kInt4 || t == DType::kMxfp4 || t == DType::kNvfp4 ? 4 : 8 * dtype_bytes(t);
}

bool is_quantized(DType t) { return dtype_bits(t) < 16; }

int unquantized_bytes(DType t) { return is_quantized(t) ? 2 : dtype_bytes(t); }

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kFp32: return "fp32";
    case DType::kFp16: return "fp16";
    case DType::kBf16: return "bf16";
    case DType::kFp8: return "fp8";
    case DType::kInt8: return "int8";
    case DType::kInt4: return "int4";
    case DType::kMxfp4: return "mxfp4";
    case DType::kNvfp4: return "nvfp4";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  for (DType t : {DType::kFp32, DType::kFp16, DType::kBf16, DType::kFp8, DType::kInt8, DType::kInt4,
                  DType::kMxfp4, DType::kNvfp4}) {
    if (dtype_name(t) == name) return t;
  }
  throw InputError(fmt::format(
      "unknown dtype \"{}\"; expected one of fp32, fp16, bf16, fp8, int8, int4, mxfp4, nvfp4",
      name));
}

}  // namespace kvsim
