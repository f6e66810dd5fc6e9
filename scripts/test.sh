#!/usr/bin/env bash
# Front door 2: install what is missing, build, and run every test, in two stages:
#   1. the Release tree (build/): every Catch2 suite, the end-to-end CLI tests and the bench smoke;
#   2. scripts/sanitize.sh (build-asan/): the same suites under ASan + UBSan, and the libFuzzer
#      smoke of every input parser.
# KVSIM_SKIP_SANITIZE=1 runs stage 1 only (a quick local check; CI runs both). Extra arguments
# go to stage 1's ctest, e.g. scripts/test.sh -R kvsim_serving_tests.
set -euo pipefail
KVSIM_WITH_TEST_PACKAGES=1  # setup.sh also installs the test-only packages (Chromium, clang)
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

start=$SECONDS
(cd "$KVSIM_BUILD" && ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@")
echo "kvsim test: Release suites passed in $((SECONDS - start)) s"
if [[ "${KVSIM_SKIP_SANITIZE:-0}" == 1 ]]; then
  echo "kvsim test: sanitizer and fuzz stage skipped (KVSIM_SKIP_SANITIZE=1)"
  exit 0
fi
start=$SECONDS
"$KVSIM_ROOT/scripts/sanitize.sh"
echo "kvsim test: ASan + UBSan suites and fuzz smoke passed in $((SECONDS - start)) s"
