#!/usr/bin/env bash
# Sessions against independent requests: `kvsim run` on TURNS turns of multi-turn sessions
# (clients: {type: sessions}) and on as many independent requests from the same number of
# closed-loop clients (clients: {type: closed_loop}), side by side. Llama-3-8B on an H100,
# paged with prefix caching, 256 clients, no think time; first prompts and turns' new tokens
# uniform in 100..1,000 tokens, outputs uniform in 50..300; a session has up to 8 turns and at most
# 8,192 tokens of context. The independent requests' prompts are the sessions' first prompts
# (the same distribution), so they are shorter than the sessions' later turns. Alternates the
# two ROUNDS times and prints each run's CPU seconds (/usr/bin/time user + system, the whole
# process), the medians and their ratio.
# Usage: bench/sessions_ratio.sh [TURNS] [ROUNDS]     (defaults: 1,000,000 turns, 3 rounds)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KVSIM="${KVSIM:-$ROOT/build/kvsim}"
TURNS="${1:-1000000}"
ROUNDS="${2:-3}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
for kind in sessions independent; do
  clients="{type: closed_loop, count: 256}"
  [[ $kind == sessions ]] && clients="{type: sessions, count: 256, turns: 8, think_s: 0,
    turn_tokens: {type: uniform, min: 100, max: 1000}, max_context_tokens: 8192}"
  cat >"$TMP/$kind.yaml" <<YAML
name: $kind
seed: 1
model: llama-3-8b
gpu: h100-sxm
engine: {max_num_seqs: 256, kv: {type: paged, block_size: 16, enable_prefix_caching: true}}
workload:
  clients: $clients
  prompt_tokens: {type: uniform, min: 100, max: 1000}
  output_tokens: {type: uniform, min: 50, max: 300}
  max_requests: $TURNS
policies: [{name: p, guards: []}]
YAML
done
echo "workload,median_cpu_s,runs"
for ((r = 1; r <= ROUNDS; ++r)); do
  for kind in sessions independent; do
    rm -rf "$TMP/out"
    /usr/bin/time -f "%U %S" -o "$TMP/time" "$KVSIM" run -o "$TMP/out" "$TMP/$kind.yaml" >/dev/null
    awk '{print $1 + $2}' "$TMP/time" >>"$TMP/$kind.cpu"
    lines=$(($(wc -l <"$TMP/out/requests.csv") - 1))
    [[ $lines == "$TURNS" ]] || { echo "$kind: $lines requests, not $TURNS" >&2; exit 1; }
  done
done
for kind in sessions independent; do
  sort -g "$TMP/$kind.cpu" | awk -v k="$kind" '
    { v[NR] = $1; all = all (NR > 1 ? " " : "") $1 }
    END { med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%s,%.2f,%s\n", k, med, all }'
done | tee "$TMP/medians"
awk -F, '{m[$1] = $2} END { printf "ratio sessions / independent: %.2f\n", m["sessions"] / m["independent"] }' "$TMP/medians"
