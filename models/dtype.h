// Element types of weights and KV cache, and their sizes.
#pragma once

#include <string>
#include <string_view>

namespace kvsim {

enum class DType { kFp32, kFp16, kBf16, kFp8, kInt8 };

int dtype_bytes(DType t);
std::string_view dtype_name(DType t);  // "fp16", ...
// Parses a lower-case name; throws InputError listing the valid names.
DType parse_dtype(std::string_view name);

}  // namespace kvsim
