#include "kernels/cpu_ref/precision.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/errors.h"

namespace kvsim::kernels {

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    case Precision::kFp32: return "fp32";
  }
  return "?";
}

Precision parse_precision(std::string_view name) {
  for (Precision p : {Precision::kFp16, Precision::kBf16, Precision::kFp32}) {
    if (precision_name(p) == name) return p;
  }
  throw InputError(fmt::format("unknown kernel dtype \"{}\"; expected fp16, bf16 or fp32", name));
}

uint16_t float_to_fp16_bits(float f) {
  uint32_t x = 0;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0));
  // 65520 is halfway between 65504 (the largest FP16) and 65536; ties go to even, i.e. to inf.
  if (mag >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (mag < 0x38800000u) {
    // Below 2^-14: a subnormal, in units of 2^-24. Scaling by 2^24 is exact, so the only rounding
    // is nearbyint's, which is round-to-nearest-even in the default mode.
    float a = 0;
    std::memcpy(&a, &mag, sizeof a);
    const auto units = static_cast<uint32_t>(std::nearbyint(a * 16777216.0f));
    return static_cast<uint16_t>(sign | units);  // 1024 units is the smallest normal: still right
  }
  const uint32_t exponent = (mag >> 23) - 127 + 15;
  const uint32_t mantissa = mag & 0x7fffffu;
  uint32_t h = (exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}

float fp16_bits_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float v = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -v : v;
  }
  const uint32_t bits = exponent == 31 ? (sign | 0x7f800000u | (mantissa << 13))
                                       : (sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t float_to_bf16_bits(float f) {
  uint32_t x = 0;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bf16_bits_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t to_bits(Precision p, float f) {
  KVSIM_CHECK(p != Precision::kFp32, "fp32 has no 16-bit encoding");
  return p == Precision::kFp16 ? float_to_fp16_bits(f) : float_to_bf16_bits(f);
}

float from_bits(Precision p, uint16_t bits) {
  KVSIM_CHECK(p != Precision::kFp32, "fp32 has no 16-bit encoding");
  return p == Precision::kFp16 ? fp16_bits_to_float(bits) : bf16_bits_to_float(bits);
}

void round_all(Precision p, std::span<float> values) {
  for (float& v : values) v = round_to(p, v);
}

std::vector<uint16_t> pack(Precision p, std::span<const float> values) {
  std::vector<uint16_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = to_bits(p, values[i]);
  return out;
}

std::vector<float> unpack(Precision p, std::span<const uint16_t> bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = from_bits(p, bits[i]);
  return out;
}

}  // namespace kvsim::kernels
