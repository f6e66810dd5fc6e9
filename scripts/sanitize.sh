#!/usr/bin/env bash
# The test suites under AddressSanitizer + UndefinedBehaviorSanitizer: a Debug build of the kvsim
# binary and every non-CUDA test suite in build-asan/, then ctest. Any sanitizer report fails the
# test that triggered it (UBSan does not recover; ASan aborts on the first error).
# Usage: scripts/sanitize.sh [CTEST ARGS...]     e.g. scripts/sanitize.sh -R kvsim_cli_tests
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${KVSIM_ASAN_BUILD:-$ROOT/build-asan}"
JOBS="$(nproc 2>/dev/null || echo 2)"

FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
mkdir -p "$BUILD"
log="$BUILD/build.log"
configure() {
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DKVSIM_WITH_CUDA=OFF \
    -DCMAKE_CXX_FLAGS="$FLAGS" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    "${LAUNCHER[@]}" ${KVSIM_ASAN_CMAKE_ARGS:-}
}
# Only the CLI and the test binaries: bench/ and validate/ tools are not part of the suite.
build() {
  local targets
  targets=(kvsim $(cmake --build "$BUILD" --target help | awk '/kvsim_[a-z_]*_tests/ {print $2}'))
  cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}"
}
if ! { configure && build; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "sanitize.sh: build failed (log: $log)" >&2
  exit 1
fi

# halt_on_error/abort: a report is a failed test, never a line lost in the output.
# detect_leaks: LeakSanitizer needs ptrace, which some containers forbid; on by default, off with
# KVSIM_ASAN_LEAKS=0.
export ASAN_OPTIONS="abort_on_error=1:halt_on_error=1:detect_leaks=${KVSIM_ASAN_LEAKS:-1}:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cd "$BUILD"
ctest --output-on-failure -j "$JOBS" "$@"
