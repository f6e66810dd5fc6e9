#!/usr/bin/env bash
# Fuzzes every kvsim input parser with libFuzzer (clang from Debian's packages) under ASan and
# UBSan, in build-fuzz/. Each target runs for KVSIM_FUZZ_SECONDS (default 10: the CI smoke);
# a longer hunt is e.g.  KVSIM_FUZZ_SECONDS=600 scripts/fuzz.sh
# Usage: scripts/fuzz.sh [TARGET...]   (default: every target; names as in tests/fuzz/CMakeLists.txt)
# Seeds come from the project's own files (scenarios, catalog profiles, claims, trace heads and
# the bad-input catalogue); the growing corpus stays in build-fuzz/corpus/<target>/ between runs.
# A crash leaves its input in build-fuzz/crashes/ and makes the script exit 1; replay it with
#   build-fuzz/fuzz/<target> build-fuzz/crashes/<file>
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${KVSIM_FUZZ_BUILD:-$ROOT/build-fuzz}"
SECONDS_PER_TARGET="${KVSIM_FUZZ_SECONDS:-10}"
JOBS="$(nproc 2>/dev/null || echo 2)"
ALL_TARGETS=(fuzz_scenario fuzz_profile fuzz_claims fuzz_trace_normalized fuzz_trace_azure
             fuzz_trace_mooncake fuzz_trace_burstgpt fuzz_trace_vidur fuzz_trace_auto)
if (($#)); then TARGETS=("$@"); else TARGETS=("${ALL_TARGETS[@]}"); fi

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
         -DKVSIM_FUZZ=ON -DKVSIM_WITH_CUDA=OFF -DCMAKE_CXX_FLAGS="$FLAGS" \
         "${LAUNCHER[@]}" ${KVSIM_FUZZ_CMAKE_ARGS:-} &&
       cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "fuzz.sh: build failed (log: $log)" >&2
  exit 1
fi

# Seed corpus per target: whole small files, and the first 20 lines of the big traces (libFuzzer
# sizes its inputs from the largest seed, and a 500 KB seed would slow every execution).
seed() {  # seed DIR FILE...
  local dir="$1" f; shift
  mkdir -p "$dir"
  for f in "$@"; do
    [[ -f "$f" ]] || continue
    head -n 20 "$f" >"$dir/$(basename "$f")"
  done
}
seeds_for() {
  local t="$1" d="$BUILD/seeds/$1"
  rm -rf "$d"
  shopt -s nullglob
  case "$t" in
    fuzz_scenario) seed "$d" "$ROOT"/scenarios/*.yaml "$ROOT"/tests/data/scenarios/*.yaml \
                             "$ROOT"/tests/data/bad/scenario/*.yaml
                   for f in "$ROOT"/scenarios/*.yaml; do cp "$f" "$d/full-$(basename "$f")"; done ;;
    fuzz_profile) seed "$d" "$ROOT"/models/catalog/profiles/*.yaml
                  for f in "$ROOT"/models/catalog/profiles/*.yaml; do cp "$f" "$d/full-$(basename "$f")"; done ;;
    fuzz_claims) seed "$d" "$ROOT"/scenarios/claims/*.csv
                 for f in "$ROOT"/scenarios/claims/*.csv; do cp "$f" "$d/full-$(basename "$f")"; done ;;
    fuzz_trace_*) seed "$d" "$ROOT"/tests/data/traces/*.csv "$ROOT"/tests/data/traces/*.jsonl \
                            "$ROOT"/tests/data/bad/traces/*.csv "$ROOT"/tests/data/bad/traces/*.jsonl ;;
  esac
  shopt -u nullglob
  echo "$d"
}

mkdir -p "$BUILD/crashes" "$BUILD/logs"
failed=0
printf '%-24s %10s %12s %8s %s\n' target seconds executions exec/s result
for t in "${TARGETS[@]}"; do
  seeds="$(seeds_for "$t")"
  corpus="$BUILD/corpus/$t"
  mkdir -p "$corpus"
  flog="$BUILD/logs/$t.log"
  # -timeout: one input taking over 5 s is a hang (the catalogue promises an answer within a
  # second). -rss_limit_mb: a runaway allocation is a finding, not a dead machine.
  set +e
  ( cd "$BUILD" && "$BUILD/fuzz/$t" "$corpus" "$seeds" -max_total_time="$SECONDS_PER_TARGET" \
      -timeout=5 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$BUILD/crashes/$t-" ) >"$flog" 2>&1
  rc=$?
  set -e
  execs="$(grep -m1 'stat::number_of_executed_units' "$flog" | awk '{print $2}')"
  rate="$(grep -m1 'stat::average_exec_per_sec' "$flog" | awk '{print $2}')"
  result=ok
  if ((rc != 0)); then
    result="CRASH (log: $flog)"
    failed=1
  fi
  printf '%-24s %10s %12s %8s %s\n' "$t" "$SECONDS_PER_TARGET" "${execs:-?}" "${rate:-?}" "$result"
done
if ((failed)); then
  echo "fuzz.sh: a target crashed; inputs are in $BUILD/crashes/" >&2
  exit 1
fi
