#!/usr/bin/env bash
# `kvsim-validate import llmservingsim` time against the number of dense.csv rows: the hand-written
# bundle of tests/data/llmservingsim/tiny with its dense.csv replaced by N rows (its 9 ops in
# turn, token counts 1, 1, ..., 2, 2, ...), run once per N. Prints one JSON line per N: rows,
# wall seconds, and seconds per 1,000 rows (linear scaling keeps that flat).
#   bench/import_llmservingsim_scaling.sh [BUILD_DIR] [N ...]     (default: build, 1000 2000 4000)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
shift || true
sizes=("$@")
((${#sizes[@]})) || sizes=(1000 2000 4000)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
src="$root/tests/data/llmservingsim/tiny/bf16"
ops=(act_fn down_proj embedding final_layernorm gate_up_proj layernorm o_proj qkv_proj rotary_emb)
for n in "${sizes[@]}"; do
  b="$work/b$n"
  mkdir -p "$b/tp1"
  cp "$src/meta.yaml" "$b/"
  cp "$src/tp1/per_sequence.csv" "$src/tp1/attention.csv" "$b/tp1/"
  awk -v n="$n" -v ops="${ops[*]}" 'BEGIN {
    k = split(ops, op, " "); print "layer,tokens,time_us"
    for (i = 0; i < n; ++i) { t = 1 + int(i / k); printf "%s,%d,%.4f\n", op[i % k + 1], t, 3 + 0.01 * t }
  }' >"$b/tp1/dense.csv"
  start=$(date +%s.%N)
  "$build/kvsim-validate" import llmservingsim "$b" -o "$work/out$n" --quiet >/dev/null
  end=$(date +%s.%N)
  awk -v n="$n" -v s="$start" -v e="$end" \
    'BEGIN { printf "{\"rows\": %d, \"wall_s\": %.3f, \"s_per_1000_rows\": %.3f}\n", n, e - s, (e - s) * 1000 / n }'
done
