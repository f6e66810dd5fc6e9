#!/usr/bin/env bash
# Unpacks what run-on-gpu.sh brought back (kvsim-gpu-results.tar.gz) into
# validate/results/<device>/, the layout the compare and plot commands read:
#   <device>/summary.txt, progress.log, steps.tsv, device.json, node.txt, nvidia-smi.{csv,txt},
#            bundle-MANIFEST.txt, kernel-tests.txt, targets.txt, calibrate.txt, compare.txt,
#            profile.yaml (the calibrated profile), memprobe/,
#            quick/      measurements.csv manifest.json fit_residuals.csv compare.csv compare.json
#                        (kvsim-validate compare/calibrate DIR, kvsim plot DIR)
#            cpu-smoke/  the CPU-backend pipeline check (not GPU figures)
# <device> is the device's name in lower case with dashes (e.g. nvidia-h200), or "no-device" for a
# run without a GPU (a dry run); --as NAME chooses it. An existing folder is kept unless --force.
#
# usage: validate/import-gpu-results.sh [--as NAME] [--dest DIR] [--force] ARCHIVE
#   --dest DIR   where the <device>/ folder goes (default: validate/results of this repository)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST=$ROOT/validate/results
NAME=""
FORCE=0
while [[ $# -gt 1 ]]; do
  case $1 in
    --as) NAME=$2; shift 2 ;;
    --dest) DEST=$2; shift 2 ;;
    --force) FORCE=1; shift ;;
    *) break ;;
  esac
done
if [[ $# -ne 1 || ! -f $1 ]]; then
  echo "usage: validate/import-gpu-results.sh [--as NAME] [--dest DIR] [--force] ARCHIVE" >&2
  exit 2
fi
ARCHIVE=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

tar -xzf "$ARCHIVE" -C "$TMP"
SRC=$TMP/kvsim-gpu-results
for f in summary.txt progress.log steps.tsv; do
  [[ -f $SRC/$f ]] || { echo "import: $ARCHIVE holds no kvsim-gpu-results/$f: not a run-on-gpu.sh archive" >&2; exit 2; }
done

if [[ -z $NAME ]]; then
  # The device's name from the device query's JSON ("name": "NVIDIA H200"), when it found one.
  if grep -q '"available": true' "$SRC/device.json" 2>/dev/null; then
    NAME=$(sed -n 's/^ *"name": "\(.*\)",\{0,1\}$/\1/p' "$SRC/device.json" | head -n 1)
  fi
  NAME=${NAME:-no-device}
fi
NAME=$(echo "$NAME" | tr '[:upper:]' '[:lower:]' | sed 's/[^a-z0-9._-]\{1,\}/-/g; s/^-//; s/-$//')
TARGET=$DEST/$NAME
if [[ -e $TARGET ]]; then
  if [[ $FORCE -eq 1 ]]; then
    rm -rf "$TARGET"
  else
    echo "import: $TARGET exists; --force replaces it, --as NAME imports beside it" >&2
    exit 2
  fi
fi
mkdir -p "$DEST"
mv "$SRC" "$TARGET"

echo "import: $ARCHIVE -> $TARGET ($(find "$TARGET" -type f | wc -l) files)"
sed -n '1,12p' "$TARGET/summary.txt" | sed 's/^/  /'
if [[ -s $TARGET/quick/measurements.csv ]]; then
  echo "next:"
  echo "  build/kvsim-validate compare $TARGET/quick --profile $TARGET/profile.yaml   # the MAPE table again"
  echo "  build/kvsim plot $TARGET/quick                                            # calibration and roofline figures"
  echo "  git add $TARGET && git commit   # then the fidelity table in validate/README.md and docs/validate.md"
else
  echo "no GPU measurements in this archive (quick/measurements.csv): see $TARGET/steps.tsv"
fi
