#!/usr/bin/env bash
# Sweep memory: peak RSS and wall time of `kvsim sweep --jobs 1` on N tiny points (one policy,
# two requests, about 2 simulated seconds each), from /usr/bin/time -v. Two shapes of the same
# size: one grid key with N seeds (the sweep's YAML list itself holds N values) and a product of
# two shorter axes (seeds x policy names). The peak should not grow with N but for that list.
# Usage: bench/sweep_memory.sh [N...]     (default: 1000 10000 100000; KVSIM=path/to/kvsim;
# SHAPES="one" or "product" for one shape)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KVSIM="${KVSIM:-$ROOT/build/kvsim}"
SIZES=("$@")
[[ ${#SIZES[@]} -gt 0 ]] || SIZES=(1000 10000 100000)
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

write_scenario() {  # $1: file, $2: the `sweep:` block's grid lines
  cat >"$1" <<YAML
name: tiny
seed: 1
model: llama-3-8b
gpu: a100-sxm4-80gb
engine: {kv: {type: paged, block_size: 16}, max_num_seqs: 8}
workload:
  arrivals: {type: poisson, rate: 1}
  max_requests: 2
  prompt_tokens: {type: fixed, value: 64}
  output_tokens: {type: fixed, value: 8}
policies:
  - name: p
    guards: []
sweep:
  grid:
$2
YAML
}
list() { seq -s, 0 $(($1 - 1)); }

printf '%-8s %-22s %12s %10s\n' points shape peak_rss_MB wall_s
for n in "${SIZES[@]}"; do
  inner=10
  while ((inner * inner < n)); do inner=$((inner * 10)); done  # n = outer x inner, both <= sqrt-ish
  outer=$((n / inner))
  write_scenario "$TMP/one.yaml" "    seed: [$(list "$n")]"
  write_scenario "$TMP/product.yaml" "    seed: [$(list "$outer")]
    policies.0.name: [$(seq -s, -f 'p%g' 0 $((inner - 1)))]"
  for shape in ${SHAPES:-one product}; do
    rm -rf "$TMP/out"
    /usr/bin/time -v -o "$TMP/time" "$KVSIM" sweep "$TMP/$shape.yaml" -o "$TMP/out" --jobs 1 \
      --no-progress >/dev/null
    rows=$(($(wc -l <"$TMP/out/summary.csv") - 1))
    [[ $rows -eq $n ]] || { echo "summary.csv has $rows rows, expected $n" >&2; exit 1; }
    kb=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$TMP/time")
    wall=$(awk '/Elapsed \(wall clock\)/ {print $NF}' "$TMP/time")
    if [[ $shape == one ]]; then label="seed x $n"; else label="seed x name $outer x $inner"; fi
    printf '%-8s %-22s %12s %10s\n' "$n" "$label" "$(awk -v k="$kb" 'BEGIN {printf "%.1f", k / 1024}')" "$wall"
  done
done
