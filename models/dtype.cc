#include "models/dtype.h"

#include <fmt/format.h>

#include "core/errors.h"

namespace kvsim {

int dtype_bytes(DType t) {
  switch (t) {
    case DType::kFp32: return 4;
    case DType::kFp16:
    case DType::kBf16: return 2;
    case DType::kFp8:
    case DType::kInt8: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kFp32: return "fp32";
    case DType::kFp16: return "fp16";
    case DType::kBf16: return "bf16";
    case DType::kFp8: return "fp8";
    case DType::kInt8: return "int8";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  for (DType t : {DType::kFp32, DType::kFp16, DType::kBf16, DType::kFp8, DType::kInt8}) {
    if (dtype_name(t) == name) return t;
  }
  throw InputError(fmt::format("unknown dtype \"{}\"; expected one of fp32, fp16, bf16, fp8, int8",
                               name));
}

}  // namespace kvsim
