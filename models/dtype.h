// Element types of weights and KV cache, and their sizes.
#pragma once

#include <string>
#include <string_view>

namespace kvsim {

// kInt4, kMxfp4 and kNvfp4 are weight-only 4-bit types, packed two to a byte, with scales per
// group of inputs (docs/memory.md "Quantized weights"): INT4 as AWQ/GPTQ store it, FP4 (E2M1)
// with an E8M0 scale per 32 (OCP MX) or an FP8 scale per 16 and a tensor scale (NVFP4).
enum class DType { kFp32, kFp16, kBf16, kFp8, kInt8, kInt4, kMxfp4, kNvfp4 };

// Whole bytes per element. Requires: not a 4-bit type (half a byte; use dtype_bits).
int dtype_bytes(DType t);
int dtype_bits(DType t);
// Weights below 16 bits are quantized: GEMMs read them at their width but embeddings, LM head,
// norms and the MoE router stay in the checkpoint's 16-bit type (as vLLM's quantization configs
// leave them), and activations are 16-bit.
bool is_quantized(DType t);
// The element size of activations and unquantized weights of a model whose weights are `t`:
// bytes(t) for fp32/fp16/bf16, 2 for quantized types.
int unquantized_bytes(DType t);
std::string_view dtype_name(DType t);  // "fp16", ...
// Parses a lower-case name; throws InputError listing the valid names.
DType parse_dtype(std::string_view name);

}  // namespace kvsim
