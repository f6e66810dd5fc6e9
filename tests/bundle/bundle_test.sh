#!/usr/bin/env bash
# The GPU-node bundle, proved on a CPU machine (ctest test `bundle`). Which bundle:
#   KVSIM_TEST_BUNDLE=DIR        an existing bundle (e.g. validate/bundle.sh's full one) is checked;
#   KVSIM_BUNDLE_TEST_FULL=1     the full bundle is built (nvcc; ~10 min on 2 busy cores);
#   otherwise (CI)               a reduced one: validate/bundle.sh --reduced, kvsim-validate only,
#                                without CUDA, built in a few minutes. What only the full bundle
#                                has (the CUDA link, kvsim, the kernel test binary) is reported SKIP.
# Checks: bundle-check.sh passes on a copy in another folder (RUNPATH $ORIGIN/../lib; ldd in an
# empty environment: nothing "not found", nothing outside the bundle but the C/C++ runtime and the
# driver) and FAILS on a planted copy that lacks a bundled library; every binary's --help and the
# CPU backend's measure of the tiny grid run from the copy under `env -i` (no LD_LIBRARY_PATH, no
# source-tree fallback for data); the bundle's run-on-gpu.sh, dry, leaves exactly
# kvsim-gpu-results.tar.gz and summary.txt, with the expected files; import-gpu-results.sh
# reproduces the work folder exactly and compare reads the imported layout.
# Exit: 0 passed (SKIP lines name what was not checked), 1 a check failed, 77 nothing checkable.
#
# usage: tests/bundle/bundle_test.sh WORKDIR
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
W=${1:?usage: bundle_test.sh WORKDIR}
rm -rf "$W" && mkdir -p "$W" && W=$(cd "$W" && pwd)
fails=0
passes=0
skips=0
ok() { echo "PASS: $*"; passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
skip() { echo "SKIP: $*"; skips=$((skips + 1)); }
check() {  # check DESCRIPTION CMD...: passes when CMD exits 0
  local desc=$1
  shift
  if "$@" >"$W/last.log" 2>&1; then ok "$desc"; else bad "$desc (exit $?)"; sed 's/^/    /' "$W/last.log" | tail -n 20; fi
}
CLEAN=(env -i PATH=/usr/bin:/bin HOME="$W" LD_LIBRARY_PATH=)

# ---- the bundle ---------------------------------------------------------------------------------
if [[ -n ${KVSIM_TEST_BUNDLE:-} ]]; then
  [[ -f $KVSIM_TEST_BUNDLE/MANIFEST.txt ]] || { echo "KVSIM_TEST_BUNDLE=$KVSIM_TEST_BUNDLE holds no MANIFEST.txt"; exit 1; }
  cp -a "$KVSIM_TEST_BUNDLE" "$W/bundle"
  echo "checking the existing bundle $KVSIM_TEST_BUNDLE"
else
  mode=(--reduced)
  [[ ${KVSIM_BUNDLE_TEST_FULL:-0} == 1 ]] && mode=()
  start=$SECONDS
  if ! validate_out=$(KVSIM_BUNDLE_BUILD=$W/build "$ROOT/validate/bundle.sh" "${mode[@]}" "$W/bundle" 2>&1); then
    echo "$validate_out"
    bad "validate/bundle.sh ${mode[*]} builds a bundle"
    echo "bundle test: $passes passed, $fails failed, $skips skipped"
    exit 1
  fi
  echo "$validate_out" | tail -n 3
  ok "validate/bundle.sh ${mode[*]} built a bundle in $((SECONDS - start))s"
fi
FULL=0
grep -q '^kind: full' "$W/bundle/MANIFEST.txt" && FULL=1
if [[ $FULL -eq 0 ]]; then
  skip "reduced bundle (no CUDA): the static CUDA runtime, the run-time cuBLAS loading, the sm_80/sm_90 kernels, kvsim and kvsim_kernels_tests are not in it (KVSIM_BUNDLE_TEST_FULL=1 or KVSIM_TEST_BUNDLE=DIR checks a full one)"
fi

# Moved: the copy must work with the original gone, from another folder.
mkdir -p "$W/elsewhere"
cp -a "$W/bundle" "$W/elsewhere/kvsim-bundle"
mv "$W/bundle" "$W/bundle.orig"
C=$W/elsewhere/kvsim-bundle

# ---- libraries ----------------------------------------------------------------------------------
check "bundle-check.sh: RUNPATH and ldd clean on the moved copy" "$C/bundle-check.sh" "$C"
for f in MANIFEST.txt SHA256SUMS run-on-gpu.sh bundle-check.sh share/kvsim/models/catalog/models.yaml \
         share/kvsim/models/catalog/gpus.yaml share/kvsim/validate/grids/quick.yaml \
         share/kvsim/validate/grids/cpu-tiny.yaml share/kvsim/scenarios/replay-gpu-llama3-8b.yaml \
         bin/kvsim-validate; do
  [[ -e $C/$f ]] || bad "bundle holds $f"
done
ok "bundle holds the manifest, scripts, catalogs, grids and the GPU replay scenario"
check "SHA256SUMS match" bash -c "cd '$C' && sha256sum --quiet -c SHA256SUMS"
for key in git_commit cuda_toolkit glibc_required libstdcxx_required; do
  grep -q "^$key: ." "$C/MANIFEST.txt" || bad "MANIFEST.txt records $key"
done
ok "MANIFEST.txt records the commit, toolkit, glibc and libstdc++ needs"
size=$(du -sb "$C" | awk '{print $1}')
[[ $size -lt $((48 * 1024 * 1024)) ]] && ok "bundle size $size bytes < 48 MiB" || bad "bundle size $size bytes >= 48 MiB"

# The checker can fail: a copy without one of its bundled libraries must be refused.
victim=$(cd "$C/lib" && ls -p | grep -v / | head -n 1)
if [[ -n $victim ]]; then
  cp -a "$C" "$W/planted"
  rm "$W/planted/lib/$victim"
  if "$W/planted/bundle-check.sh" "$W/planted" >"$W/planted.log" 2>&1; then
    bad "bundle-check.sh refuses a bundle without lib/$victim (it passed)"
  elif grep -q "$victim" "$W/planted.log"; then
    ok "bundle-check.sh refuses a bundle without lib/$victim: $(grep -m1 "$victim" "$W/planted.log")"
  else
    bad "bundle-check.sh failed on the planted bundle without naming $victim"; cat "$W/planted.log"
  fi
  rm -rf "$W/planted"
else
  skip "planted missing library: the bundle has no lib/ entries"
fi

# ---- the binaries, in an empty environment --------------------------------------------------------
for b in "$C"/bin/*; do
  check "env -i $(basename "$b") --help" "${CLEAN[@]}" "$b" --help
done
if [[ $FULL -eq 1 ]]; then
  for b in kvsim kvsim_kernels_tests; do [[ -x $C/bin/$b ]] || bad "full bundle has bin/$b"; done
  "${CLEAN[@]}" "$C/bin/kvsim-validate" device >"$W/device.txt" 2>&1
  rc=$?
  if [[ $rc -le 1 ]] && grep -q "cuBLAS [0-9]" "$W/device.txt"; then
    ok "kvsim-validate device (exit $rc) loads cuBLAS at run time: $(cat "$W/device.txt")"
  elif [[ $rc -le 1 ]]; then
    skip "cuBLAS could not be loaded on this machine (no CUDA toolkit?): $(cat "$W/device.txt")"
  else
    bad "kvsim-validate device exits $rc: $(cat "$W/device.txt")"
  fi
fi
check "env -i kvsim-validate measure, CPU backend, tiny grid, from the moved copy" \
  "${CLEAN[@]}" "$C/bin/kvsim-validate" measure --grid "$C/share/kvsim/validate/grids/cpu-tiny.yaml" \
  --backend cpu -o "$W/measure" --quiet
[[ -s $W/measure/measurements.csv && -s $W/measure/manifest.json ]] &&
  ok "measure wrote measurements.csv and manifest.json" || bad "measure wrote measurements.csv and manifest.json"
# Data come from the bundle: without its catalogs the binary must fail (no source-tree fallback).
mv "$C/share/kvsim/models/catalog" "$W/catalog.away"
if "${CLEAN[@]}" "$C/bin/kvsim-validate" memprobe --backend cpu -o "$W/memprobe" >"$W/nodata.log" 2>&1; then
  bad "without share/kvsim/models/catalog the bundle's kvsim-validate must fail (it found data elsewhere)"
else
  ok "data come from the bundle only: $(head -c 160 "$W/nodata.log")"
fi
mv "$W/catalog.away" "$C/share/kvsim/models/catalog"

# ---- the dry run --------------------------------------------------------------------------------
OUTD=$W/device-out
"${CLEAN[@]}" KVSIM_WORK="$W/work" bash "$C/run-on-gpu.sh" "$OUTD" >"$W/run.log" 2>&1
rc=$?
case $rc in
  4) ok "run-on-gpu.sh dry run: no device, exit 4 ($(grep -o 'done in [0-9]*s' "$W/run.log"))" ;;
  0) ok "run-on-gpu.sh ran with a device, exit 0" ;;
  *) bad "run-on-gpu.sh exit $rc"; tail -n 30 "$W/run.log" | sed 's/^/    /' ;;
esac
listing=$(cd "$OUTD" && ls -A | tr '\n' ' ')
[[ $listing == "kvsim-gpu-results.tar.gz summary.txt " ]] && ok "OUT holds exactly: $listing" ||
  bad "OUT holds exactly kvsim-gpu-results.tar.gz and summary.txt (it holds: $listing)"
asize=$(stat -c %s "$OUTD/kvsim-gpu-results.tar.gz" 2>/dev/null || echo 0)
[[ $asize -gt 0 && $asize -lt $((16 * 1024 * 1024)) ]] && ok "archive $asize bytes < 16 MiB" || bad "archive size $asize"
want=(summary.txt progress.log steps.tsv node.txt device.txt device.json bundle-MANIFEST.txt
      bundle-check.txt cpu-smoke/measurements.csv cpu-smoke/manifest.json cpu-smoke/fit_residuals.csv
      cpu-smoke/profile.yaml cpu-smoke/compare.csv cpu-smoke/compare.json cpu-smoke/compare.txt)
[[ $FULL -eq 1 ]] && want+=(kernel-tests.txt)
members=$(tar -tzf "$OUTD/kvsim-gpu-results.tar.gz" 2>/dev/null)
missing=()
for f in "${want[@]}"; do grep -qx "kvsim-gpu-results/$f" <<<"$members" || missing+=("$f"); done
[[ ${#missing[@]} -eq 0 ]] && ok "archive holds the ${#want[@]} expected files" || bad "archive lacks: ${missing[*]}"
[[ $FULL -eq 0 ]] && skip "kernel-tests.txt: the reduced bundle has no kernel test binary"
if [[ $rc -eq 4 ]]; then
  grep -q 'skipped: no device' "$W/work/kvsim-gpu-results/steps.tsv" && ok "GPU steps recorded as skipped: no device" ||
    bad "GPU steps recorded as skipped: no device"
  skip "the GPU steps (measure-quick, memprobe, calibrate, compare, targets, profile-check): no device here"
fi
for key in "device:" "kernel tests:" "targets" "MAPE by kernel class" "steps:"; do
  grep -q "$key" "$OUTD/summary.txt" || bad "summary.txt says '$key'"
done
ok "summary.txt has device, kernel tests, targets, MAPE and steps"

# ---- import round trip --------------------------------------------------------------------------
check "import-gpu-results.sh unpacks the archive" \
  "$ROOT/validate/import-gpu-results.sh" --dest "$W/results" "$OUTD/kvsim-gpu-results.tar.gz"
imported=$(ls -d "$W"/results/*/ 2>/dev/null | head -n 1)
check "import reproduces the run's folder exactly" diff -r "$W/work/kvsim-gpu-results" "${imported%/}"
if "$ROOT/validate/import-gpu-results.sh" --dest "$W/results" "$OUTD/kvsim-gpu-results.tar.gz" >/dev/null 2>&1; then
  bad "a second import without --force must refuse to overwrite"
else
  ok "a second import without --force refuses to overwrite"
fi
check "kvsim-validate compare reads the imported layout" "${CLEAN[@]}" "$C/bin/kvsim-validate" compare \
  "${imported%/}/cpu-smoke" --profile "${imported%/}/cpu-smoke/profile.yaml" -o "$W/recompare" --quiet

echo "bundle test: $passes passed, $fails failed, $skips skipped"
[[ $fails -eq 0 ]] || exit 1
[[ $passes -gt 0 ]] || exit 77
exit 0
