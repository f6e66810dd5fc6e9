#!/usr/bin/env bash
# Fast-forward under each scheduler: `kvsim run` with and without --no-fast-forward on one
# long-output workload (Llama-3-8B on A100-80GB, paged, REQUESTS Poisson arrivals at 2 req/s,
# prompts and outputs uniform in 100..2,000 tokens; static batches of 32), for continuous,
# continuous with prefix caching (vLLM's default), vllm_v0 and static, alternating the modes
# ROUNDS times; and continuous on a sliding-window model (Mistral-7B-v0.1, window 4,096), with
# outputs up to 6,000 tokens so that contexts pass the window. Prints each run's CPU seconds
# (/usr/bin/time user + system, the whole process) and the medians, and checks that both modes
# wrote identical result files.
# Usage: bench/scheduler_ab.sh [REQUESTS] [ROUNDS]     (defaults: 40000 requests, 3 rounds)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KVSIM="${KVSIM:-$ROOT/build/kvsim}"
REQUESTS="${1:-40000}"
ROUNDS="${2:-3}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
echo "scheduler,mode,median_cpu_s,runs"
for sched in continuous continuous+prefix_caching continuous+sliding_window vllm_v0 static; do
  caching=false model=llama-3-8b outputs=2000
  [[ $sched == *+prefix_caching ]] && caching=true
  [[ $sched == *+sliding_window ]] && model=mistral-7b outputs=6000
  cat >"$TMP/$sched.yaml" <<YAML
name: $sched-long
model: $model
gpu: a100-sxm4-80gb
engine:
  scheduler: ${sched%%+*}
  batch_size: 32
  kv: {type: paged, block_size: 16, enable_prefix_caching: $caching}
workload:
  arrivals: {type: poisson, rate: 2}
  max_requests: $REQUESTS
  prompt_tokens: {type: uniform, min: 100, max: 2000}
  output_tokens: {type: uniform, min: 100, max: $outputs}
policies: [{name: p, guards: []}]
YAML
  for ((r = 1; r <= ROUNDS; ++r)); do
    for mode in ff step; do
      flag=""; [[ $mode == step ]] && flag="--no-fast-forward"
      rm -rf "$TMP/$sched-$mode"
      /usr/bin/time -f "%U %S" -o "$TMP/time" "$KVSIM" run $flag -o "$TMP/$sched-$mode" "$TMP/$sched.yaml" >/dev/null
      awk '{print $1 + $2}' "$TMP/time" >>"$TMP/$sched-$mode.cpu"
    done
    for f in summary.json summary.csv requests.csv timeseries.csv; do
      cmp -s "$TMP/$sched-ff/$f" "$TMP/$sched-step/$f" || { echo "$sched: $f differs between the modes" >&2; exit 1; }
    done
  done
  for mode in ff step; do
    sort -g "$TMP/$sched-$mode.cpu" | awk -v s="$sched" -v m="$mode" '
      { v[NR] = $1; all = all (NR > 1 ? " " : "") $1 }
      END { med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%s,%s,%.2f,%s\n", s, m, med, all }'
  done
done
echo "every scheduler: result files identical in both modes"
