// Element types of the kernels (FP16 and BF16) and their exact host-side conversions, so the CPU
// references see the same rounded values the GPU kernels read, and the CPU backend can store
// its results at the kernel's precision. FP32 is for CPU-only cases (the CPU forward pass of a
// float32 model computes and stores float32): no rounding, 4 bytes per element; it has no 16-bit
// words, so to_bits / from_bits / pack / unpack reject it (the CUDA kernels are 16-bit only).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace kvsim::kernels {

enum class Precision { kFp16, kBf16, kFp32 };

std::string_view precision_name(Precision p);  // "fp16", "bf16", "fp32"
// Throws InputError listing the valid names.
Precision parse_precision(std::string_view name);
inline constexpr int precision_bytes(Precision p) { return p == Precision::kFp32 ? 4 : 2; }

// Round-to-nearest-even conversions, with infinities, NaNs and (for FP16) subnormals handled.
uint16_t float_to_fp16_bits(float f);
float fp16_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t h);

uint16_t to_bits(Precision p, float f);
float from_bits(Precision p, uint16_t bits);
// The nearest value representable at precision `p` (f itself at FP32).
inline float round_to(Precision p, float f) {
  return p == Precision::kFp32 ? f : from_bits(p, to_bits(p, f));
}

// Rounds every element in place.
void round_all(Precision p, std::span<float> values);
// Packs floats into the 16-bit words a device buffer holds, and back.
std::vector<uint16_t> pack(Precision p, std::span<const float> values);
std::vector<float> unpack(Precision p, std::span<const uint16_t> bits);

}  // namespace kvsim::kernels
