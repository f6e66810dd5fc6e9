#!/usr/bin/env bash
# A longer libFuzzer hunt over every kvsim input parser than CI's smoke: the fuzz targets built
# with clang's full coverage instrumentation (-fsanitize=fuzzer-no-link, comparison tracing
# included) under ASan + UBSan in build-fuzz/ (through scripts/sanitize.sh), each run for
# KVSIM_FUZZ_SECONDS (default 60) by ctest -L fuzz, two at a time. CI's smoke is the same tests
# in scripts/sanitize.sh's own tree (build-asan/), with lighter instrumentation.
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

# The tree, flags and ctest run are scripts/sanitize.sh's, with the full instrumentation and only
# the fuzz targets built.
rm -f "$BUILD"/fuzz-work/logs/*.log  # the table below lists this run's targets only
status=0
KVSIM_ASAN_BUILD="$BUILD" KVSIM_SANITIZE_COVERAGE=full KVSIM_SANITIZE_TARGETS=kvsim_fuzz_all \
  KVSIM_FUZZ_SECONDS="$SECONDS_PER_TARGET" "$ROOT/scripts/sanitize.sh" -L fuzz "$@" || status=$?
# One line per target that ran: executions and rate, from its log.
printf '%-24s %12s %10s\n' target executions exec/s
for f in "$BUILD"/fuzz-work/logs/*.log; do
  [[ -f "$f" ]] || continue
  printf '%-24s %12s %10s\n' "$(basename "$f" .log)" \
    "$(grep -m1 'stat::number_of_executed_units' "$f" | awk '{print $2}')" \
    "$(grep -m1 'stat::average_exec_per_sec' "$f" | awk '{print $2}')"
done
exit $status
