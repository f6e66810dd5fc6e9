#!/usr/bin/env bash
# The checks that keep tests honest must be able to fail (tests/CMakeLists.txt):
#   1. a test case with zero assertions, run as every suite runs (-w NoAssertions), fails and
#      Catch names it;
#   2. a case with an assertion passes under the same flag (the flag is not failing everything);
#   3. a skipped case prints the "<kind> test skipped:" line that ctest's SKIP_REGULAR_EXPRESSION
#      (the same text as tests/CMakeLists.txt's) turns into Skipped.
set -uo pipefail
bin="$1"
regex="$2"
fail() { echo "FAIL: $*"; exit 1; }

out="$("$bin" -w NoAssertions "[planted-empty]" 2>&1)" && fail "a zero-assertion case passed: $out"
grep -q "No assertions in test case 'planted: passes with zero assertions'" <<<"$out" ||
  fail "Catch did not name the zero-assertion case: $out"

out="$("$bin" -w NoAssertions "[planted-checked]" 2>&1)" || fail "a checked case failed: $out"

out="$("$bin" -w NoAssertions "[planted-skip]" 2>&1)"
grep -Eq "$regex" <<<"$out" || fail "the skip line does not match '$regex': $out"
echo "a zero-assertion case fails, a checked one passes, a skip prints ctest's skip line"
