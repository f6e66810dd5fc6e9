#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernels/cpu_ref/tolerance.h"

using namespace kvsim::kernels;

TEST_CASE("check_close passes within atol + rtol*|ref| and fails outside", "[kernels][tolerance]") {
  const Tolerance tol{.atol = 1e-3, .rtol = 1e-2};
  const std::vector<float> ref = {1.0f, -2.0f, 0.0f, 100.0f};
  std::vector<float> got = {1.0105f, -2.02f, 0.0009f, 99.0f};
  CheckReport ok = check_close(ref, got, tol);
  CHECK(ok.passed);
  CHECK(ok.max_abs_error == Approx(1.0).epsilon(1e-6));
  got[1] = -2.03f;  // 0.03 > 1e-3 + 0.02
  got[3] = 98.0f;   // 2 > 1e-3 + 1
  CheckReport bad = check_close(ref, got, tol);
  CHECK_FALSE(bad.passed);
  CHECK(bad.bad == 2);
  REQUIRE(bad.first_bad == std::vector<int64_t>{1, 3});
  const std::string line = bad.summary("flash v2", "B=1 H=2");
  CHECK_THAT(line, Catch::Matchers::Contains("FAIL") && Catch::Matchers::Contains("B=1 H=2") &&
                       Catch::Matchers::Contains("[1] ref -2 got -2.03") &&
                       Catch::Matchers::Contains("max abs 2.000e+00"));
}

TEST_CASE("NaN in a result is always a failure", "[kernels][tolerance]") {
  const std::vector<float> ref = {1.0f, 2.0f};
  const std::vector<float> got = {1.0f, NAN};
  CheckReport r = check_close(ref, got, tolerance_for(Precision::kFp16));
  CHECK_FALSE(r.passed);
  CHECK(r.first_bad == std::vector<int64_t>{1});
}

TEST_CASE("the tolerance table is looser for bf16 than for fp16", "[kernels][tolerance]") {
  CHECK(tolerance_for(Precision::kBf16).atol > tolerance_for(Precision::kFp16).atol);
  CHECK(tolerance_for(Precision::kBf16).rtol >= tolerance_for(Precision::kFp16).rtol);
}
