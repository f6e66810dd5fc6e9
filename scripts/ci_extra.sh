#!/usr/bin/env bash
# CI's reliability stages (issue 9), after scripts/test.sh: the test suites under ASan + UBSan
# (scripts/sanitize.sh, build-asan/) and a libFuzzer smoke of every parser (scripts/fuzz.sh,
# build-fuzz/). Each stage can be skipped:
#   KVSIM_SKIP_SANITIZE=1   no sanitizer build and ctest
#   KVSIM_SKIP_FUZZ=1       no fuzz build and smoke
#   KVSIM_FUZZ_SECONDS=N    seconds per fuzz target (default 10)
# Prints each stage's wall time; exits non-zero if any stage fails.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
status=0
stage() {  # stage NAME SKIP_VAR COMMAND...
  local name="$1" skip="$2"; shift 2
  if [[ "${!skip:-0}" == 1 ]]; then
    echo "ci_extra: $name skipped ($skip=1)"
    return 0
  fi
  local start=$SECONDS
  echo "ci_extra: $name ..."
  if "$@"; then
    echo "ci_extra: $name passed in $((SECONDS - start)) s"
  else
    echo "ci_extra: $name FAILED after $((SECONDS - start)) s" >&2
    status=1
  fi
}
stage sanitizers KVSIM_SKIP_SANITIZE "$ROOT/scripts/sanitize.sh"
stage fuzz-smoke KVSIM_SKIP_FUZZ "$ROOT/scripts/fuzz.sh"
exit $status
