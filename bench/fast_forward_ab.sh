#!/usr/bin/env bash
# kvsim_bench_sim with and without fast-forward on the same trace, side by side: prints each
# mode's JSON line and checks that the two result folders are byte-identical (summary.json,
# summary.csv, requests.csv, timeseries.csv). The CI smoke run calls it on a small size; on demand
# (bench/README.md) it is the fast-forward measurement: alternate ROUNDS times and compare the medians.
# Usage: bench/fast_forward_ab.sh [REQUESTS] [ROUNDS]     (defaults: 2000 requests, 1 round)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH="${BENCH:-$ROOT/build/bench/kvsim_bench_sim}"
REQUESTS="${1:-2000}"
ROUNDS="${2:-1}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
for ((r = 1; r <= ROUNDS; ++r)); do
  for mode in ff step; do
    flag=""; [[ $mode == step ]] && flag="--no-fast-forward"
    rm -rf "$TMP/$mode"
    line="$("$BENCH" --requests "$REQUESTS" --out "$TMP/$mode" $flag)"
    echo "$mode $line"
  done
  for f in summary.json summary.csv requests.csv timeseries.csv; do
    cmp -s "$TMP/ff/$f" "$TMP/step/$f" || { echo "$f differs between the modes" >&2; exit 1; }
  done
done
echo "fast-forward and stepping: result files identical"
