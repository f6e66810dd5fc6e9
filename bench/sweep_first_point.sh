#!/usr/bin/env bash
# How soon a very large sweep runs its first point: a sweep of RATES x 1,000 points (RATES
# arrival rates x 1,000 seeds) of a two-request run, `kvsim sweep -j 1` into a fresh folder, timed
# from the start to the first point's manifest.json; then the sweep is stopped.
#   bench/sweep_first_point.sh [KVSIM] [RATES]     (default build/kvsim, 1000: 10^6 points)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${1:-$ROOT/build/kvsim}" rates="${2:-1000}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
seq_list() { local s; s="$(seq -s ', ' 1 "$1")"; echo "[$s]"; }
cat >"$work/sweep.yaml" <<YAML
name: first-point
model: seed-7b-mha
gpu: a100-sxm4-80gb
workload: {arrivals: {type: fixed, rate: 1}, max_requests: 2, prompt_tokens: 128, output_tokens: 4}
policies: [{name: none, guards: []}]
sweep:
  grid:
    workload.arrivals.rate: $(seq_list "$rates")
    seed: $(seq_list 1000)
YAML
start=$(date +%s.%N)
"$bin" sweep "$work/sweep.yaml" -o "$work/out" -j 1 --no-progress >/dev/null 2>&1 &
pid=$!
while ! compgen -G "$work/out/points/*/manifest.json" >/dev/null; do
  kill -0 "$pid" 2>/dev/null || { echo "the sweep ended before a point was written" >&2; exit 1; }
  sleep 0.1
done
end=$(date +%s.%N)
kill "$pid"
wait "$pid" 2>/dev/null || true
echo "$((rates * 1000)) points: first point written after $(echo "$end - $start" | bc) s"
