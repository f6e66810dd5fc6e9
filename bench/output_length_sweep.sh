#!/usr/bin/env bash
# Cost per request as the mean output length grows: kvsim_bench_sim --output-mean L (the shipped
# traces' prompts, geometric outputs of mean L) at 64, 256, 1024 and 4096 tokens, the same request
# count each, with and without fast-forward, alternating the modes ROUNDS times. Two arrival
# rates a point:
#   - scaled: 500 / L req/s, so the offered decode work per second stays the same (at L = 64 the
#     prompts' prefill then overloads the server, whose queue grows through the run: requests
#     share iterations, a cheaper event count per request than at the other points);
#   - fixed: 500 / 4096 req/s at every L (the scaled sweep's last point), so the events a request
#     brings (its arrival, admission, prefill, completion, the samples over its share of the run)
#     stay the same and only the tokens grow: the cost that grows with tokens, not events.
# Prints a CSV row per point (median CPU seconds over the rounds, microseconds of CPU per request,
# iterations and those run in closed form), checks both modes wrote the same summary.json, and
# writes the figure bench/output_length_cost.svg (CPU per request against L, both modes, both
# rates).
# Usage: bench/output_length_sweep.sh [REQUESTS] [ROUNDS]     (defaults: 5000 requests, 3 rounds)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH="${BENCH:-$ROOT/build/bench/kvsim_bench_sim}"
REQUESTS="${1:-5000}"
ROUNDS="${2:-3}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
echo "rates,mean_output,mode,requests,median_cpu_s,cpu_us_per_request,iterations,fast_forward_iterations" | tee "$TMP/points.csv"
for rates in scaled fixed; do
  for L in 64 256 1024 4096; do
    if [[ $rates == scaled ]]; then
      rate="$(python3 -c "print(500 / $L)")"
    else
      rate="$(python3 -c "print(500 / 4096)")"
    fi
    for ((r = 1; r <= ROUNDS; ++r)); do
      for mode in ff step; do
        flag=""; [[ $mode == step ]] && flag="--no-fast-forward"
        rm -rf "$TMP/$mode"
        "$BENCH" --requests "$REQUESTS" --output-mean "$L" --rate "$rate" --out "$TMP/$mode" $flag >>"$TMP/$rates.$L.$mode.jsonl"
      done
      cmp -s "$TMP/ff/summary.json" "$TMP/step/summary.json" || { echo "summary.json differs at L=$L ($rates rates)" >&2; exit 1; }
    done
    for mode in ff step; do
      python3 - "$TMP/$rates.$L.$mode.jsonl" "$rates" "$L" "$mode" <<'PY' | tee -a "$TMP/points.csv"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cpu = statistics.median(r["cpu_s"] for r in rows)
r = rows[0]
print(f'{sys.argv[2]},{sys.argv[3]},{sys.argv[4]},{r["requests"]},{cpu:.3f},{cpu / r["requests"] * 1e6:.1f},{r["iterations"]},{r["fast_forward_iterations"]}')
PY
    done
  done
done
python3 - "$TMP/points.csv" "$ROOT/bench/output_length_cost.svg" <<'PY'
# A small SVG line chart (no plotting library needed): x = log2 of the mean output, y = CPU us
# per request, one line per mode and rate design.
import csv, math, sys
pts = {}
for row in csv.DictReader(open(sys.argv[1])):
    pts.setdefault((row["mode"], row["rates"]), []).append((int(row["mean_output"]), float(row["cpu_us_per_request"])))
W, H, L, B = 560, 340, 60, 40
ymax = max(y for v in pts.values() for _, y in v) * 1.1
xs = sorted({x for v in pts.values() for x, _ in v})
def px(x): return L + (math.log2(x) - math.log2(xs[0])) / (math.log2(xs[-1]) - math.log2(xs[0])) * (W - L - 20)
def py(y): return H - B - y / ymax * (H - B - 20)
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<line x1="{L}" y1="{H-B}" x2="{W-20}" y2="{H-B}" stroke="black"/><line x1="{L}" y1="20" x2="{L}" y2="{H-B}" stroke="black"/>',
       f'<text x="{(W+L)/2}" y="{H-8}" text-anchor="middle">mean output tokens</text>',
       f'<text x="14" y="{H/2}" transform="rotate(-90 14 {H/2})" text-anchor="middle">CPU us per request</text>']
for x in xs:
    out.append(f'<text x="{px(x):.1f}" y="{H-B+16}" text-anchor="middle">{x}</text>')
for k in range(5):
    y = ymax * k / 4
    out.append(f'<text x="{L-6}" y="{py(y)+4:.1f}" text-anchor="end">{y:.0f}</text>')
colors = {"ff": "#1f77b4", "step": "#d62728"}
names = {"ff": "fast-forward", "step": "stepping (--no-fast-forward)"}
rates = {"scaled": "rate 500/L", "fixed": "rate 500/4096"}
dashes = {"scaled": "", "fixed": ' stroke-dasharray="6,4"'}
for i, ((mode, r), v) in enumerate(sorted(pts.items())):
    v.sort()
    path = " ".join(f'{px(x):.1f},{py(y):.1f}' for x, y in v)
    out.append(f'<polyline points="{path}" fill="none" stroke="{colors[mode]}" stroke-width="2"{dashes[r]}/>')
    out.append(f'<text x="{L+10}" y="{30+16*i}" fill="{colors[mode]}">{names[mode]}, {rates[r]}{" (dashed)" if dashes[r] else ""}</text>')
out.append('</svg>')
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
echo "figure: bench/output_length_cost.svg"
