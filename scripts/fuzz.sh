#!/usr/bin/env bash
# A longer libFuzzer hunt over every kvsim input parser than CI's smoke: the fuzz targets built
# with clang's full coverage instrumentation (-fsanitize=fuzzer-no-link, comparison tracing
# included) under ASan + UBSan in build-fuzz/, each run for KVSIM_FUZZ_SECONDS (default 60) by
# ctest -L fuzz, two at a time. CI's smoke is the same tests in scripts/sanitize.sh's tree.
#   KVSIM_FUZZ_SECONDS=600 scripts/fuzz.sh            every target, ten minutes each
#   scripts/fuzz.sh -R fuzz_trace_azure                one target (ctest arguments)
# Seeds come from the project's own files (tests/fuzz/CMakeLists.txt); the growing corpus stays
# in build-fuzz/fuzz-work/corpus/<target>/ between runs. A crash fails the target's test and
# leaves its input in build-fuzz/fuzz-work/crashes/; replay it with
#   build-fuzz/fuzz/<target> build-fuzz/fuzz-work/crashes/<file>
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${KVSIM_FUZZ_BUILD:-$ROOT/build-fuzz}"
SECONDS_PER_TARGET="${KVSIM_FUZZ_SECONDS:-60}"
JOBS="$(nproc 2>/dev/null || echo 2)"

# clang and libFuzzer's runtime (libclang-rt-14-dev on Debian 12), installed only when missing.
need=()
for p in clang libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  echo "fuzz.sh: installing ${need[*]}" >&2
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Every library is instrumented for coverage (fuzzer-no-link) and checked by ASan + UBSan; only
# the fuzz binaries link libFuzzer's main.
FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
mkdir -p "$BUILD"
log="$BUILD/build.log"
if ! { CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DKVSIM_FUZZ=ON -DKVSIM_WITH_CUDA=OFF -DKVSIM_BUILD_BENCH=OFF \
         -DKVSIM_FUZZ_SECONDS="$SECONDS_PER_TARGET" -DCMAKE_CXX_FLAGS="$FLAGS" \
         "${LAUNCHER[@]}" ${KVSIM_FUZZ_CMAKE_ARGS:-} &&
       cmake --build "$BUILD" -j "$JOBS" --target kvsim_fuzz_all; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "fuzz.sh: build failed (log: $log)" >&2
  exit 1
fi

export ASAN_OPTIONS="abort_on_error=1:halt_on_error=1:detect_leaks=${KVSIM_ASAN_LEAKS:-1}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
(cd "$BUILD" && ctest -L fuzz -j "$JOBS" --output-on-failure "$@") || status=$?
# One line per target that ran: executions and rate, from its log.
printf '%-24s %12s %10s\n' target executions exec/s
for f in "$BUILD"/fuzz-work/logs/*.log; do
  [[ -f "$f" ]] || continue
  printf '%-24s %12s %10s\n' "$(basename "$f" .log)" \
    "$(grep -m1 'stat::number_of_executed_units' "$f" | awk '{print $2}')" \
    "$(grep -m1 'stat::average_exec_per_sec' "$f" | awk '{print $2}')"
done
exit $status
