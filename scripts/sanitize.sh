#!/usr/bin/env bash
# The test suites under AddressSanitizer + UndefinedBehaviorSanitizer, and the libFuzzer smoke of
# every parser, in one clang tree (build-asan/): the kvsim binaries, every non-CUDA test suite and
# the fuzz targets, built with -O1 (the suites run about five times faster than at -O0), then
# ctest. Any sanitizer report fails the test that triggered it (UBSan does not recover; ASan
# aborts on the first error). Called by scripts/test.sh after the Release suites; alone:
#   scripts/sanitize.sh [CTEST ARGS...]     e.g. scripts/sanitize.sh -L fuzz, -R kvsim_cli_tests
# KVSIM_FUZZ_SECONDS (default 10) sets how long each fuzz target runs. scripts/fuzz.sh reuses this
# script for its longer hunt with KVSIM_ASAN_BUILD (the tree), KVSIM_SANITIZE_COVERAGE=full and
# KVSIM_SANITIZE_TARGETS (what to build; default everything).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${KVSIM_ASAN_BUILD:-$ROOT/build-asan}"
JOBS="$(nproc 2>/dev/null || echo 2)"
for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "sanitize.sh: $tool not found (scripts/test.sh installs it)" >&2; exit 1; }
done

# Light coverage instrumentation (8-bit counters) is all libFuzzer needs to steer the smoke, and
# unlike -fsanitize=fuzzer-no-link's comparison tracing it barely slows the suites that share
# these objects; the long hunt (scripts/fuzz.sh) asks for the full instrumentation.
COVERAGE="-fsanitize-coverage=inline-8bit-counters,pc-table"
[[ "${KVSIM_SANITIZE_COVERAGE:-light}" == full ]] && COVERAGE="-fsanitize=fuzzer-no-link"
FLAGS="-O1 -gline-tables-only -fsanitize=address,undefined -fno-sanitize-recover=undefined"
FLAGS+=" -fno-omit-frame-pointer $COVERAGE"
TARGETS=()
[[ -n "${KVSIM_SANITIZE_TARGETS:-}" ]] && TARGETS=(--target $KVSIM_SANITIZE_TARGETS)
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros}"  # as in setup.sh
mkdir -p "$BUILD"
log="$BUILD/build.log"
if ! { CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=None \
         -DKVSIM_WITH_CUDA=OFF -DKVSIM_BUILD_BENCH=OFF -DKVSIM_BUILD_PYTHON=OFF -DKVSIM_FUZZ=ON \
         -DKVSIM_FUZZ_SECONDS="${KVSIM_FUZZ_SECONDS:-10}" -DCMAKE_CXX_FLAGS="$FLAGS" \
         -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
         "${LAUNCHER[@]}" ${KVSIM_ASAN_CMAKE_ARGS:-} &&
       cmake --build "$BUILD" -j "$JOBS" "${TARGETS[@]}"; } >"$log" 2>&1; then
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
