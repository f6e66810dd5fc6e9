#!/usr/bin/env bash
# Runs the whole hardware validation on a GPU node and packs what it produced into OUT:
#   OUT/kvsim-gpu-results.tar.gz   everything (one folder, kvsim-gpu-results/; import it with
#                                  validate/import-gpu-results.sh)
#   OUT/summary.txt                the essentials in plain text: device, versions, kernel tests,
#                                  the targets, MAPE by kernel class, every step's status
# and nothing else, so it survives a return channel that takes only a few flat files. The archive
# and the summary are rewritten after every step: a run cut short still leaves the latest.
#
# Two ways to run it:
#   from a bundle (validate/bundle.sh; this script sits next to bin/): builds nothing, needs only
#     the NVIDIA driver, the node's cuBLAS 13 (a CUDA toolkit, or KVSIM_CUBLAS_DIR; PyTorch's
#     cuBLAS wheel is the fallback) and coreutils/tar/gzip;
#   from a source tree (validate/run-on-gpu.sh): first builds build-gpu/ (nvcc, cmake >= 3.25 and
#     kvsim's libraries; KVSIM_GPU_BUILD to reuse a folder, JOBS to cap parallelism).
# Steps: bundle check (ldd), device query, kernel correctness tests, quick grid (cuda), memprobe,
# calibrate, compare, the targets, the profile loaded by the simulator, a CPU-backend smoke of
# the same pipeline, and last, optionally, the end-to-end replay on the GPU (kvsim's engine with
# every iteration run by the CUDA forward pass, first checked by kvsim_replay_cuda_tests:
# `kvsim-validate e2e`, or `replay` in a binary without e2e; KVSIM_E2E=0 turns it off; it needs KVSIM_E2E_MIN_S, default 150 s, of the budget
# left, else it is skipped, not failed). Each has its own time limit, cut further to what is left of the run's budget
# (KVSIM_RUN_BUDGET_S: 330 s from a bundle, 600 s from source), so the run ends in time. A failed
# step is reported and the run goes on with every step that does not depend on it. Without a
# usable GPU the GPU steps are reported as skipped ("no device") and the rest still runs.
# Work folder: KVSIM_WORK (default: a new folder under TMPDIR); it is kept.
# Exit: 0 all ran and passed, 1 a step failed, 4 no usable GPU (the GPU steps skipped), 2 usage.
#
# usage: run-on-gpu.sh OUT
set -uo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: run-on-gpu.sh OUT" >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$1" && OUT=$(cd "$1" && pwd)
START=$SECONDS
export PATH=$PATH:/usr/local/cuda/bin
if [[ -x $HERE/bin/kvsim-validate ]]; then
  MODE=bundle
  BUNDLE=$HERE
  BIN=$HERE/bin/kvsim-validate
  KTESTS=$HERE/bin/kvsim_kernels_tests
  FTESTS=$HERE/bin/kvsim_replay_cuda_tests
  KVSIM=$HERE/bin/kvsim
  GRIDS=$HERE/share/kvsim/validate/grids
  SCENARIOS=$HERE/share/kvsim/scenarios
  BUDGET=${KVSIM_RUN_BUDGET_S:-330}
else
  MODE=source
  ROOT=$(cd "$HERE/.." && pwd)
  BUILD=${KVSIM_GPU_BUILD:-$ROOT/build-gpu}
  BIN=$BUILD/kvsim-validate
  KTESTS=$BUILD/tests/kernels/kvsim_kernels_tests
  FTESTS=$BUILD/tests/replay_cuda/kvsim_replay_cuda_tests
  KVSIM=$BUILD/kvsim
  GRIDS=$ROOT/validate/grids
  SCENARIOS=$ROOT/scenarios
  BUDGET=${KVSIM_RUN_BUDGET_S:-600}
fi
WORK=${KVSIM_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/kvsim-gpu.XXXXXX")}
R=$WORK/kvsim-gpu-results
mkdir -p "$R"
: >"$R/progress.log"
printf 'step\tstatus\tseconds\n' >"$R/steps.tsv"
FAILED=()
DEVICE=0          # 1 once the device query found a usable GPU
DEVICE_LINE="not queried"
NODEV="no device"  # why the GPU steps are skipped, when they are
RESERVE=15        # seconds kept for packing at the end

log() { printf '[run-on-gpu %4ds] %s\n' $((SECONDS - START)) "$*" | tee -a "$R/progress.log"; }
record() { printf '%s\t%s\t%s\n' "$1" "$2" "${3:-0}" >>"$R/steps.tsv"; }
skip() { log "$1: skipped: $2"; record "$1" "skipped: $2"; }

# step NAME LIMIT_S LOGFILE CMD...: runs CMD with its output in LOGFILE, under LIMIT_S or what is
# left of the budget, whichever is less; records the outcome. Returns CMD's status.
step() {
  local name=$1 limit=$2 logfile=$3
  shift 3
  local left=$((BUDGET - (SECONDS - START) - RESERVE))
  if [[ $left -lt 5 ]]; then
    skip "$name" "no time left in the ${BUDGET}s budget"
    FAILED+=("$name")
    return 125
  fi
  [[ $left -lt $limit ]] && limit=$left
  log "$name: start (limit ${limit}s, log $(basename "$logfile"))"
  local t0=$SECONDS
  timeout --kill-after=5 "$limit" "$@" >"$logfile" 2>&1
  local rc=$?
  if [[ $rc -eq 0 ]]; then
    log "$name: ok ($((SECONDS - t0))s)"
    record "$name" ok $((SECONDS - t0))
  else
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
      log "$name: TIMED OUT after ${limit}s"
      record "$name" "TIMED OUT (${limit}s)" $((SECONDS - t0))
    else
      log "$name: FAILED (exit $rc)"
      record "$name" "FAILED (exit $rc)" $((SECONDS - t0))
    fi
    tail -n 15 "$logfile" | sed 's/^/    /' | tee -a "$R/progress.log"
    FAILED+=("$name")
  fi
  return $rc
}

# unfail NAME STATUS: the last step NAME's failure is an expected outcome (no device): record
# STATUS instead and take it off the failed list.
unfail() {
  local kept=() f
  for f in "${FAILED[@]}"; do [[ $f == "$1" ]] || kept+=("$f"); done
  FAILED=("${kept[@]}")
  sed -i '$d' "$R/steps.tsv"
  record "$1" "$2"
}

manifest_value() {  # KEY FILE: the value of "KEY: value" in a MANIFEST.txt-style file
  sed -n "s/^$1: //p" "$2" 2>/dev/null | head -n 1
}

# The kernel tests' outcome in one line, robust to both ways of reporting a [gpu] test without a
# device (a passing test with a "skipped" warning, or Catch2/ctest's skip).
kernel_tests_line() {
  local f=$R/kernel-tests.txt
  [[ -f $f ]] || { echo "not run"; return; }
  local counts skips
  counts=$(grep -E "^(All tests passed|test cases:)" "$f" | tail -n 1)
  skips=$(grep -ci "skipped" "$f")
  echo "${counts:-no Catch2 summary line (see kernel-tests.txt)}; 'skipped' mentioned $skips time(s); status $(awk -F'\t' '$1 == "kernel-tests" {print $2}' "$R/steps.tsv" | tail -n 1)"
}

write_summary() {
  local s=$R/summary.txt
  {
    echo "kvsim GPU validation: summary (full results in kvsim-gpu-results.tar.gz)"
    echo "run: $(date -u +%Y-%m-%dT%H:%M:%SZ), $((SECONDS - START))s so far, from a $MODE, budget ${BUDGET}s, host $(hostname 2>/dev/null)"
    if [[ $MODE == bundle ]]; then
      echo "bundle: commit $(manifest_value git_commit "$BUNDLE/MANIFEST.txt"), toolkit $(manifest_value cuda_toolkit "$BUNDLE/MANIFEST.txt"), needs glibc $(manifest_value glibc_required "$BUNDLE/MANIFEST.txt")"
    else
      echo "source: commit $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
    fi
    echo "node: glibc $(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}'), $(uname -r), nvcc $(nvcc --version 2>/dev/null | grep -o 'V[0-9][0-9.]*' | tail -n 1 || true)"
    echo "device: $DEVICE_LINE"
    [[ -s $R/nvidia-smi.csv ]] && echo "nvidia-smi: $(tail -n 1 "$R/nvidia-smi.csv")"
    echo "kernel tests: $(kernel_tests_line)"
    echo
    if [[ -s $R/targets.txt ]]; then cat "$R/targets.txt"; else echo "targets: not measured ($([[ $DEVICE -eq 1 ]] && echo 'see the steps' || echo 'no device'))"; fi
    echo
    if [[ -s $R/compare.txt ]]; then
      echo "MAPE by kernel class (GPU, held-out cases):"
      cat "$R/compare.txt"
    else
      echo "MAPE by kernel class: no GPU comparison"
    fi
    e2e_status=$(awk -F'\t' '$1 == "e2e" {print $2}' "$R/steps.tsv" | tail -n 1)
    forward_status=$(awk -F'\t' '$1 == "forward-tests" {print $2}' "$R/steps.tsv" | tail -n 1)
    echo "CUDA forward pass vs its reference (forward-tests.txt): ${forward_status:-not run}"
    echo "end to end on the GPU (measured replay, e2e/): ${e2e_status:-not run}"
    if [[ -s $R/cpu-smoke/compare.txt ]]; then
      echo "CPU-backend smoke (pipeline check, not GPU figures): $(head -n 1 "$R/cpu-smoke/compare.txt")"
    fi
    echo
    echo "steps:"
    column -t -s $'\t' "$R/steps.tsv" 2>/dev/null | sed 's/^/  /' || sed 's/^/  /' "$R/steps.tsv"
    [[ ${#FAILED[@]} -gt 0 ]] && echo "failed: ${FAILED[*]}"
  } >"$s"
  cp "$s" "$OUT/summary.txt.part" && mv -f "$OUT/summary.txt.part" "$OUT/summary.txt"
}

# The archive, replaced atomically: a run killed part-way leaves the previous complete one.
pack() {
  write_summary
  tar -czf "$OUT/kvsim-gpu-results.tar.gz.part" -C "$WORK" kvsim-gpu-results 2>>"$R/progress.log" &&
    mv -f "$OUT/kvsim-gpu-results.tar.gz.part" "$OUT/kvsim-gpu-results.tar.gz"
}
trap 'log "interrupted"; pack; exit 130' INT TERM

log "kvsim hardware validation from a $MODE; results into $OUT (work folder $R)"

# ---- node and bundle ----------------------------------------------------------------------------
{
  echo "uname: $(uname -a)"
  echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null)"
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -n 2 | tr '\n' ' ')"
  echo "python: $(python3 --version 2>&1)"
  echo "cpus: $(nproc)"
} >"$R/node.txt"
if command -v nvidia-smi >/dev/null; then
  timeout 30 nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem,driver_version \
    --format=csv >"$R/nvidia-smi.csv" 2>&1
  timeout 30 nvidia-smi -q >"$R/nvidia-smi.txt" 2>&1
  log "nvidia-smi: $(tail -n 1 "$R/nvidia-smi.csv")"
else
  log "nvidia-smi: not on PATH"
fi
if [[ $MODE == bundle ]]; then
  cp "$BUNDLE/MANIFEST.txt" "$R/bundle-MANIFEST.txt"
  # A node whose libstdc++ is older than the binaries need: use the bundle's own (lib/compat/).
  if ! "$BIN" --version >/dev/null 2>"$R/version-check.txt"; then
    if grep -qE "GLIBCXX|CXXABI" "$R/version-check.txt" && [[ -d $BUNDLE/lib/compat ]]; then
      export LD_LIBRARY_PATH=$BUNDLE/lib/compat${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      log "the node's libstdc++ is too old ($(head -n 1 "$R/version-check.txt")); using the bundle's lib/compat/"
    else
      log "kvsim-validate does not start here: $(head -n 3 "$R/version-check.txt")"
    fi
  fi
  step bundle-check 30 "$R/bundle-check.txt" "$BUNDLE/bundle-check.sh" "$BUNDLE"
else
  for tool in nvcc cmake; do
    command -v "$tool" >/dev/null || { log "missing $tool on PATH; cannot build"; record build "FAILED: no $tool"; pack; exit 3; }
  done
  step configure 120 "$R/build-configure.log" \
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKVSIM_WITH_CUDA=ON \
    "-DCMAKE_CUDA_ARCHITECTURES=80;90" -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" &&
    step build 300 "$R/build.log" \
      cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target kvsim-validate kvsim_kernels_tests \
      kvsim_replay_cuda_tests kvsim
  [[ -x $BIN ]] || { log "no kvsim-validate; stopping"; pack; exit 3; }
fi

# ---- device -------------------------------------------------------------------------------------
device_query() {  # NAME: kvsim-validate device; exit 1 means "no usable GPU", not a failure
  local t0=$SECONDS rc
  log "$1: start (limit 30s, log device.txt)"
  timeout --kill-after=5 30 "$BIN" device -o "$R/device.json" >"$R/device.txt" 2>&1
  rc=$?
  DEVICE_LINE=$(head -n 1 "$R/device.txt")
  case $rc in
    0) log "$1: ok"; record "$1" ok $((SECONDS - t0)) ;;
    1) log "$1: no usable GPU"; record "$1" "no device" $((SECONDS - t0)); NODEV="no device" ;;
    *) log "$1: FAILED (exit $rc)"; sed 's/^/    /' "$R/device.txt" | tail -n 15 | tee -a "$R/progress.log"
       record "$1" "FAILED (exit $rc)" $((SECONDS - t0)); FAILED+=("$1")
       NODEV="the device query failed (exit $rc)" ;;
  esac
  return $rc
}
device_query device && DEVICE=1
# cuBLAS not found where the binaries look (KVSIM_CUBLAS_DIR, loader path, CUDA toolkit): try
# PyTorch's cuBLAS wheel, then anywhere on the disk, and ask again.
if [[ $DEVICE -eq 1 ]] && grep -q '"cublas": "unavailable' "$R/device.json"; then
  cublas_dir=$(timeout 30 python3 - 2>/dev/null <<'PY'
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for p in glob.glob(os.path.join(r, "nvidia", "**", "libcublas.so.13"), recursive=True):
        print(os.path.dirname(p)); sys.exit(0)
PY
  )
  [[ -z $cublas_dir ]] && cublas_dir=$(timeout 30 find / -xdev -name libcublas.so.13 -not -path '/proc/*' 2>/dev/null | head -n 1 | xargs -r dirname)
  if [[ -n $cublas_dir ]]; then
    log "cuBLAS: not on the default paths; using $cublas_dir"
    export KVSIM_CUBLAS_DIR=$cublas_dir
    device_query device-cublas-retry
  else
    log "cuBLAS: libcublas.so.13 not found on this node; native and gemm kernels will fail"
  fi
fi
[[ $DEVICE -eq 1 ]] && log "device: $DEVICE_LINE" || log "$NODEV ($DEVICE_LINE): the GPU steps will be skipped"
pack

# ---- kernel correctness tests (the CPU references run everywhere; the [gpu] ones need a device) --
if [[ -x $KTESTS ]]; then
  step kernel-tests 120 "$R/kernel-tests.txt" "$KTESTS" --durations yes
  ktrc=$?
  if [[ $ktrc -ne 0 && $DEVICE -eq 0 ]] && grep -qi "skip" "$R/kernel-tests.txt"; then
    # A test binary that reports the [gpu] tests as skipped through its exit status: not a failure.
    unfail kernel-tests "skipped: no device (exit $ktrc)"
  fi
  log "kernel tests: $(kernel_tests_line)"
else
  skip kernel-tests "no kvsim_kernels_tests in this $MODE"
fi
pack

# ---- GPU measurements ---------------------------------------------------------------------------
Q=$R/quick
if [[ $DEVICE -eq 1 ]]; then
  step measure-quick 170 "$R/measure.log" "$BIN" measure --grid "$GRIDS/quick.yaml" --backend cuda -o "$Q"
  pack
  step memprobe 45 "$R/memprobe.log" "$BIN" memprobe --backend cuda -o "$R/memprobe"
  pack
  if [[ -s $Q/measurements.csv ]]; then
    step calibrate 30 "$R/calibrate.txt" "$BIN" calibrate "$Q" -o "$R/profile.yaml" &&
      step compare 30 "$R/compare.txt" "$BIN" compare "$Q" --profile "$R/profile.yaml"
    # Targets, from measurements.csv and the catalog peaks recorded in the manifest.
    peak_flops=$(grep -o '"fp16_flops": [0-9.e+]*' "$Q/manifest.json" | awk '{print $2}')
    peak_bw=$(grep -o '"hbm_bytes_per_s": [0-9.e+]*' "$Q/manifest.json" | awk '{print $2}')
    awk -F, -v pf="$peak_flops" -v pb="$peak_bw" '
      NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
      $col["reps"] > 0 {
        k = $col["kernel"]; f = $col["flop_per_s"]; b = $col["bytes_per_s"]
        if (k == "flash" && $col["head_dim"] == 128 && $col["seq_q"] >= 4096 && $col["causal"] == "false" && f > flash) flash = f
        if (k == "paged_decode" && b > paged) paged = b
        if ((k == "membw_copy" || k == "membw_read") && b > bw) bw = b
      }
      END {
        if (pf <= 0 || pb <= 0) { print "targets: no catalog peaks in the manifest"; exit }
        printf "targets (peaks %.4g FLOP/s, %.4g B/s from the manifest):\n", pf, pb
        printf "  flash D=128 s>=4k non-causal: %.1f TFLOP/s = %.1f%% of peak (target >= 40%%)\n", flash / 1e12, 100 * flash / pf
        printf "  paged decode best:            %.0f GB/s = %.1f%% of peak (target >= 60%%)\n", paged / 1e9, 100 * paged / pb
        printf "  bandwidth probe best:         %.0f GB/s = %.1f%% of peak (target >= 85%%)\n", bw / 1e9, 100 * bw / pb
      }' "$Q/measurements.csv" >"$R/targets.txt" 2>&1
    sed 's/^/    /' "$R/targets.txt" | tee -a "$R/progress.log"
    record targets "$([[ -s $R/targets.txt ]] && echo ok || echo FAILED)"
    # The calibrated profile, loaded by the simulator (the GPU the manifest's peaks come from).
    gpu=$(awk '/"gpu_spec"/ {g = 1} g && /"name"/ {gsub(/[",]/, "", $2); print $2; exit}' "$Q/manifest.json")
    if [[ -s $R/profile.yaml && -x $KVSIM && -n $gpu ]]; then
      step profile-check 20 "$R/profile-check.txt" "$KVSIM" latency --model llama-3-8b --gpu "$gpu" \
        --attention flash --seq 4096,32768 --profile "$R/profile.yaml"
    fi
  else
    for s in calibrate compare targets profile-check; do skip "$s" "no measurements (measure-quick failed)"; done
  fi
else
  for s in measure-quick memprobe calibrate compare targets profile-check; do skip "$s" "$NODEV"; done
fi
pack

# ---- the same pipeline on the CPU backend: proves the binaries and data files work here ----------
C=$R/cpu-smoke
mkdir -p "$C"
step cpu-measure 60 "$C/measure.log" "$BIN" measure --grid "$GRIDS/cpu-tiny.yaml" --backend cpu -o "$C" --quiet &&
  step cpu-calibrate 20 "$C/calibrate.txt" "$BIN" calibrate "$C" -o "$C/profile.yaml" &&
  step cpu-compare 20 "$C/compare.txt" "$BIN" compare "$C" --profile "$C/profile.yaml"

# ---- end to end on the GPU: kvsim's engine, each iteration's time measured by the CUDA forward pass
# First the forward pass against its dense reference (kvsim_replay_cuda_tests, seconds): the
# replay's clock is only as good as it. Older bundles lack the binary.
if [[ $DEVICE -ne 1 ]]; then
  skip forward-tests "$NODEV"
elif [[ -x $FTESTS ]]; then
  step forward-tests 60 "$R/forward-tests.txt" "$FTESTS" --durations yes
else
  skip forward-tests "no kvsim_replay_cuda_tests in this $MODE"
fi
pack
# Then the replay, last and optional: everything above is complete before it starts. It runs only
# with a device and enough of the budget left for a full replay (a replay cut short has no
# comparison to show).
E2E_SCENARIO=$SCENARIOS/replay-gpu-llama3-8b.yaml
E2E_LIMIT=${KVSIM_E2E_LIMIT_S:-240}
E2E_MIN=${KVSIM_E2E_MIN_S:-150}
e2e_left=$((BUDGET - (SECONDS - START) - RESERVE))
if [[ ${KVSIM_E2E:-1} == 0 ]]; then
  skip e2e "KVSIM_E2E=0"
elif [[ $DEVICE -ne 1 ]]; then
  skip e2e "$NODEV"
elif [[ ! -f $E2E_SCENARIO ]]; then
  skip e2e "no $E2E_SCENARIO in this $MODE"
  FAILED+=(e2e)
elif [[ $e2e_left -lt $E2E_MIN ]]; then
  skip e2e "${e2e_left}s left of the ${BUDGET}s budget, it needs ${E2E_MIN}s (raise KVSIM_RUN_BUDGET_S)"
else
  # `e2e` (modeled and measured replay, compared) where the binary has it; else the measured
  # replay alone.
  commands=$("$BIN" --help 2>/dev/null)
  if grep -qE '^[[:space:]]+e2e[[:space:]]' <<<"$commands"; then
    step e2e "$E2E_LIMIT" "$R/e2e.log" "$BIN" e2e "$E2E_SCENARIO" --backend cuda -o "$R/e2e"
  elif grep -qE '^[[:space:]]+replay[[:space:]]' <<<"$commands"; then
    log "e2e: this kvsim-validate has no e2e command; running replay instead"
    step e2e "$E2E_LIMIT" "$R/e2e.log" "$BIN" replay "$E2E_SCENARIO" --backend cuda -o "$R/e2e"
  else
    skip e2e "this kvsim-validate has neither e2e nor replay"
  fi
fi
pack

log "done in $((SECONDS - START))s"
[[ ${#FAILED[@]} -gt 0 ]] && log "failed steps: ${FAILED[*]}"
pack
# After the last pack, so stdout only: the archive's progress.log ends with the line above.
printf '[run-on-gpu %4ds] wrote %s (%s bytes) and %s\n' $((SECONDS - START)) \
  "$OUT/kvsim-gpu-results.tar.gz" "$(stat -c %s "$OUT/kvsim-gpu-results.tar.gz")" "$OUT/summary.txt"
[[ ${#FAILED[@]} -gt 0 ]] && exit 1
[[ $DEVICE -eq 1 ]] || exit 4
exit 0
