#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/errors.h"
#include "kernels/cpu_ref/precision.h"

using namespace kvsim::kernels;

TEST_CASE("fp16 conversion hits the known bit patterns", "[kernels][precision]") {
  CHECK(float_to_fp16_bits(1.0f) == 0x3c00);
  CHECK(float_to_fp16_bits(-2.0f) == 0xc000);
  CHECK(float_to_fp16_bits(65504.0f) == 0x7bff);
  CHECK(float_to_fp16_bits(65519.0f) == 0x7bff);
  CHECK(float_to_fp16_bits(65520.0f) == 0x7c00);               // the tie rounds to even: infinity
  CHECK(float_to_fp16_bits(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(float_to_fp16_bits(std::ldexp(1.0f, -25)) == 0x0000);  // tie to even: zero
  CHECK(float_to_fp16_bits(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to the even mantissa (1.0).
  CHECK(float_to_fp16_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  CHECK(float_to_fp16_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(float_to_fp16_bits(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK((float_to_fp16_bits(std::numeric_limits<float>::quiet_NaN()) & 0x7fff) > 0x7c00);
}

TEST_CASE("every finite fp16 value survives a round trip through float", "[kernels][precision]") {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) continue;  // NaN payloads
    const float f = fp16_bits_to_float(h);
    INFO("bits " << bits);
    REQUIRE(float_to_fp16_bits(f) == h);
  }
}

TEST_CASE("bf16 conversion rounds to nearest even", "[kernels][precision]") {
  CHECK(float_to_bf16_bits(1.0f) == 0x3f80);
  CHECK(bf16_bits_to_float(0x3f80) == 1.0f);
  CHECK(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);      // tie -> even
  CHECK(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);  // tie -> even (up)
  CHECK(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -7)) == 0x3f81);      // exact
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    if ((h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0) continue;
    REQUIRE(float_to_bf16_bits(bf16_bits_to_float(h)) == h);
  }
}

TEST_CASE("rounding error is within half a unit in the last place", "[kernels][precision]") {
  for (float x = -3.0f; x < 3.0f; x += 0.0137f) {
    CHECK(std::abs(round_to(Precision::kFp16, x) - x) <= std::abs(x) * std::ldexp(1.0, -11) + 1e-7);
    CHECK(std::abs(round_to(Precision::kBf16, x) - x) <= std::abs(x) * std::ldexp(1.0, -8) + 1e-30);
  }
}

TEST_CASE("precision names parse and bad ones are input errors", "[kernels][precision]") {
  CHECK(parse_precision("fp16") == Precision::kFp16);
  CHECK(parse_precision("bf16") == Precision::kBf16);
  CHECK(precision_name(Precision::kBf16) == "bf16");
  CHECK(parse_precision("fp32") == Precision::kFp32);
  REQUIRE_THROWS_AS(parse_precision("fp64"), kvsim::InputError);
  REQUIRE_THROWS_WITH(parse_precision("half"), Catch::Matchers::Contains("fp16, bf16 or fp32"));
}

TEST_CASE("fp32 is the identity: 4 bytes per element, nothing rounded", "[kernels][precision]") {
  // 1 + 2^-20 needs 21 mantissa bits: fp16 (10) and bf16 (7) round it to 1, fp32 (23) keeps it.
  const float x = 1.0f + std::ldexp(1.0f, -20);
  CHECK(round_to(Precision::kFp32, x) == x);
  CHECK(round_to(Precision::kFp16, x) == 1.0f);
  CHECK(precision_bytes(Precision::kFp32) == 4);
  CHECK(precision_bytes(Precision::kFp16) == 2);
  std::vector<float> v = {x, -x};
  round_all(Precision::kFp32, v);
  CHECK(v[0] == x);
  CHECK(v[1] == -x);
}
