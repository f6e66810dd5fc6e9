// Planted test cases for tests/skip_check/check_planted.sh, never run as tests of their own:
// they show that the suites' `-w NoAssertions` (tests/CMakeLists.txt) fails a test case that
// checks nothing, and that a skipped case prints the line ctest turns into Skipped.
#include <catch2/catch.hpp>

#include "tests/test_skip.h"

TEST_CASE("planted: passes with zero assertions", "[planted-empty]") {
  // Does its work and checks nothing: with -w NoAssertions this must fail.
  volatile int x = 1 + 1;
  (void)x;
}

TEST_CASE("planted: one assertion", "[planted-checked]") { CHECK(1 + 1 == 2); }

TEST_CASE("planted: cannot run here", "[planted-skip]") {
  KVSIM_TEST_SKIP("plot", "planted: what a test that cannot run prints");
}
