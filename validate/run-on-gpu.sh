#!/usr/bin/env bash
# Runs the whole hardware validation on a GPU node and leaves everything in OUTDIR:
#   build (nvcc, sm_80 + sm_90) -> kernel correctness tests -> quick grid -> memprobe ->
#   calibrate -> compare -> a summary against the issue's targets.
# Needs: the CUDA toolkit (nvcc, cuBLAS), cmake >= 3.25, a C++20 compiler and kvsim's libraries
# (yaml-cpp, Eigen, spdlog/fmt, CLI11, nlohmann-json, Boost headers, Catch2). No network, no apt.
# Finishes in a few minutes on an H200; every step has its own time limit so the whole run stays
# well inside 8 minutes. Set KVSIM_GPU_BUILD to reuse a build folder, JOBS to cap parallelism.
#
# usage: validate/run-on-gpu.sh OUTDIR
set -uo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: validate/run-on-gpu.sh OUTDIR" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$1" && OUT=$(cd "$1" && pwd)
BUILD=${KVSIM_GPU_BUILD:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc)}
export PATH=/usr/local/cuda/bin:$PATH
START=$SECONDS
FAILED=()

log() { printf '[run-on-gpu %4ds] %s\n' $((SECONDS - START)) "$*" | tee -a "$OUT/progress.log"; }

# step NAME LIMIT_S LOGFILE CMD...: runs CMD under a time limit, output to LOGFILE, notes failures.
step() {
  local name=$1 limit=$2 logfile=$3
  shift 3
  log "$name: start (limit ${limit}s, log $(basename "$logfile"))"
  timeout --kill-after=10 "$limit" "$@" >"$logfile" 2>&1
  local rc=$?
  if [[ $rc -eq 0 ]]; then
    log "$name: ok"
  else
    [[ $rc -eq 124 || $rc -eq 137 ]] && log "$name: TIMED OUT after ${limit}s" || log "$name: FAILED (exit $rc)"
    tail -n 20 "$logfile" | sed 's/^/    /'
    FAILED+=("$name")
  fi
  return $rc
}

: >"$OUT/progress.log"
log "kvsim hardware validation into $OUT"
for tool in nvcc cmake; do
  command -v "$tool" >/dev/null || { log "missing $tool on PATH; cannot build"; exit 3; }
done
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem,driver_version --format=csv \
    >"$OUT/nvidia-smi.csv" 2>&1
  nvidia-smi -q >"$OUT/nvidia-smi.txt" 2>&1
  log "device: $(tail -n 1 "$OUT/nvidia-smi.csv")"
fi
nvcc --version | tail -n 2 >"$OUT/nvcc-version.txt"

step configure 120 "$OUT/build.log" \
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKVSIM_WITH_CUDA=ON \
  "-DCMAKE_CUDA_ARCHITECTURES=80;90" -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" || exit 3
step build 240 "$OUT/build-make.log" \
  cmake --build "$BUILD" -j "$JOBS" --target kvsim-validate kvsim_kernels_tests || exit 3
BIN=$BUILD/kvsim-validate

step kernel-tests 90 "$OUT/kernel-tests.txt" "$BUILD/tests/kernels/kvsim_kernels_tests" --durations yes
grep -E "^(All tests passed|test cases:)" "$OUT/kernel-tests.txt" | sed 's/^/    /'
if grep -q "test skipped" "$OUT/kernel-tests.txt"; then
  grep -m1 -A1 "test skipped" "$OUT/kernel-tests.txt" | sed 's/^/    /'
  log "no usable GPU: the [gpu] tests skipped; stopping before the CUDA measurements"
  exit 4
fi

step measure-quick 240 "$OUT/measure.log" "$BIN" measure --grid "$ROOT/validate/grids/quick.yaml" \
  --backend cuda -o "$OUT/quick"
step memprobe 60 "$OUT/memprobe.log" "$BIN" memprobe --backend cuda -o "$OUT/memprobe"
step calibrate 60 "$OUT/calibrate.txt" "$BIN" calibrate "$OUT/quick" -o "$OUT/profile.yaml"
step compare 60 "$OUT/compare.txt" "$BIN" compare "$OUT/quick" --profile "$OUT/profile.yaml"
cat "$OUT/calibrate.txt" "$OUT/compare.txt" "$OUT/memprobe.log" 2>/dev/null

# Targets of the issue, from measurements.csv and the catalog peaks recorded in the manifest.
CSV=$OUT/quick/measurements.csv
if [[ -f $CSV ]]; then
  peak_flops=$(grep -o '"fp16_flops": [0-9.e+]*' "$OUT/quick/manifest.json" | awk '{print $2}')
  peak_bw=$(grep -o '"hbm_bytes_per_s": [0-9.e+]*' "$OUT/quick/manifest.json" | awk '{print $2}')
  awk -F, -v pf="$peak_flops" -v pb="$peak_bw" '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $col["reps"] > 0 {
      k = $col["kernel"]; f = $col["flop_per_s"]; b = $col["bytes_per_s"]
      if (k == "flash" && $col["head_dim"] == 128 && $col["seq_q"] >= 4096 && $col["causal"] == "false" && f > flash) flash = f
      if (k == "paged_decode" && b > paged) paged = b
      if ((k == "membw_copy" || k == "membw_read") && b > bw) bw = b
    }
    END {
      printf "targets (peaks %.4g FLOP/s, %.4g B/s from the manifest):\n", pf, pb
      printf "  flash D=128 s>=4k non-causal: %.1f TFLOP/s = %.1f%% of peak (target >= 40%%)\n", flash / 1e12, 100 * flash / pf
      printf "  paged decode best:            %.0f GB/s = %.1f%% of peak (target >= 60%%)\n", paged / 1e9, 100 * paged / pb
      printf "  bandwidth probe best:         %.0f GB/s = %.1f%% of peak (target >= 85%%)\n", bw / 1e9, 100 * bw / pb
    }' "$CSV" | tee "$OUT/targets.txt"
fi

log "done in $((SECONDS - START))s; outputs in $OUT"
if [[ ${#FAILED[@]} -gt 0 ]]; then
  log "failed steps: ${FAILED[*]}"
  exit 1
fi
