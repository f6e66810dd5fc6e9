#!/usr/bin/env bash
# Sweep scaling: `kvsim sweep --jobs 2` against `--jobs 1` on a 16-point sweep (margin x block
# size over the whole Mooncake conversation trace), alternating A B A B so drift hits both.
# Prints each run's wall and user seconds (/usr/bin/time), the medians, the wall ratio, and
# checks that both wrote the same summary.csv.
# Usage: bench/sweep_scaling.sh [ROUNDS] [MAX_REQUESTS]     (defaults: 5 rounds, 12031 requests)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KVSIM="${KVSIM:-$ROOT/build/kvsim}"
ROUNDS="${1:-5}"
REQUESTS="${2:-12031}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
GRID='sweep.grid={policies.1.guards.0.safety_margin_gb: [0, 2, 4, 6], engine.kv.block_size: [16, 32, 64, 128]}'

for ((r = 1; r <= ROUNDS; ++r)); do
  for j in 1 2; do
    rm -rf "$TMP/j$j"
    /usr/bin/time -a -o "$TMP/times$j" -f "%e %U" "$KVSIM" sweep "$ROOT/scenarios/sweep-margin-blocksize.yaml" \
      -o "$TMP/j$j" --jobs "$j" --no-progress --set "$GRID" \
      --set "workload.trace.max_requests=$REQUESTS" >/dev/null
  done
done
cmp -s "$TMP/j1/summary.csv" "$TMP/j2/summary.csv" || { echo "summary.csv differs between --jobs 1 and 2" >&2; exit 1; }
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for j in 1 2; do
  echo "jobs $j: wall s $(cut -d' ' -f1 "$TMP/times$j" | tr '\n' ' ')| median wall $(cut -d' ' -f1 "$TMP/times$j" | median) s, median user $(cut -d' ' -f2 "$TMP/times$j" | median) s"
done
w1="$(cut -d' ' -f1 "$TMP/times1" | median)"
w2="$(cut -d' ' -f1 "$TMP/times2" | median)"
awk -v a="$w1" -v b="$w2" 'BEGIN {printf "speed-up (median wall, jobs 1 / jobs 2): %.2fx; summary.csv identical\n", a / b}'
