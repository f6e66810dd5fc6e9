// Element types of the kernels (FP16 and BF16) and their exact host-side conversions, so the CPU
// references see the same rounded values the GPU kernels read, and the CPU backend can store
// its results at the kernel's precision.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace kvsim::kernels {

enum class Precision { kFp16, kBf16 };

std::string_view precision_name(Precision p);  // "fp16", "bf16"
// Throws InputError listing the valid names.
Precision parse_precision(std::string_view name);
inline constexpr int precision_bytes(Precision) { return 2; }

// Round-to-nearest-even conversions, with infinities, NaNs and (for FP16) subnormals handled.
uint16_t float_to_fp16_bits(float f);
float fp16_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t h);

uint16_t to_bits(Precision p, float f);
float from_bits(Precision p, uint16_t bits);
// The nearest value representable at precision `p`.
inline float round_to(Precision p, float f) { return from_bits(p, to_bits(p, f)); }

// Rounds every element in place.
void round_all(Precision p, std::span<float> values);
// Packs floats into the 16-bit words a device buffer holds, and back.
std::vector<uint16_t> pack(Precision p, std::span<const float> values);
std::vector<float> unpack(Precision p, std::span<const uint16_t> bits);

}  // namespace kvsim::kernels
