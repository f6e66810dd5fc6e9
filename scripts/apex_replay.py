#!/usr/bin/python3
"""Replays APEX+'s served vLLM 0.6.0 traces through kvsim and prints its predicted figures.

    apex_replay.py [--apex DIR] [--kvsim BIN] [--out DIR] [--vllm-version V] [--only SUBSTR]
                   [--set PATH=VALUE ...]

Each `served/<run>.csv` (arrival_s,prompt_tokens,output_tokens) becomes one kvsim scenario with
the server flags of the folder's README table (docs/fidelity.md, "Replaying a normalized CSV with
server flags"): the model (llama = llama-3.1-70b in BF16, mistral = mistral-large-2407 with FP8
weights and an FP8 KV cache) on h100-sxm at the layout's TP, gpu_memory_utilization,
max_model_len, chunked prefill (vLLM 0.6's V0 `_schedule_chunked_prefill`: kvsim's continuous
scheduler) or not (V0 `_schedule_default`: kvsim's vllm_v0 scheduler), max_num_batched_tokens,
max_num_seqs 256, block 16, no prefix caching and `engine.vllm_version`. A DP layout's shard
(`-rK`) is one independent server with its share of the trace, so it is one scenario too.

Prints, per run: requests, mean TTFT, TPOT as vLLM 0.6's /metrics gives it (`tpot_metrics_s`:
all inter-token gaps over all output tokens, first tokens included) and mean E2E, in ms; and
writes them to OUT/figures.csv. The measured figures are held out: nothing here compares with
them or is fitted to them.
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys

# The README's flag table: (gpu_memory_utilization, max_model_len, chunked prefill,
# max_num_batched_tokens) by model and whether the layout's TP is 2.
FLAGS = {
    ("llama", False): (0.97, 131072, True, 512),
    ("llama", True): (0.97, 24272, False, 24272),
    ("mistral", False): (0.97, 131072, True, 512),
    ("mistral", True): (0.85, 20560, False, 20560),
}
LAYOUT_TP = {"tp8": 8, "tp4": 4, "tp2": 2, "2dp4tp": 4, "4dp2tp": 2}
RUN_ID = re.compile(r"^(llama|mistral)-([a-z]+)_(\d+)-(tp8|tp4|tp2|2dp4tp|4dp2tp)(?:-r(\d+))?$")


def scenario_yaml(run_id, trace, version):
    m = RUN_ID.match(run_id)
    if not m:
        raise ValueError(f"{run_id}: not a <model>-<trace>_<rate>-<layout>[-rK] run id")
    model, layout = m.group(1), m.group(4)
    tp = LAYOUT_TP[layout]
    util, max_len, chunked, batched = FLAGS[(model, tp == 2)]
    lines = [
        f"name: apex-{run_id}",
        "seed: 1",
        "model: " + ("llama-3.1-70b" if model == "llama" else "mistral-large-2407"),
        "gpu: h100-sxm",
        "engine:",
        "  scheduler: " + ("continuous" if chunked else "vllm_v0"),
        f"  chunked_prefill: {'true' if chunked else 'false'}",
        f"  max_num_batched_tokens: {batched}",
        "  max_num_seqs: 256",
        f"  max_model_len: {max_len}",
        f"  tensor_parallel: {tp}",
        "  preemption: recompute",
        f'  vllm_version: "{version}"',
    ]
    if model == "mistral":
        lines += ["  weights_dtype: fp8", "  kv_cache_dtype: fp8"]
    lines += [
        "  kv:",
        "    type: paged",
        "    block_size: 16",
        f"    gpu_memory_utilization: {util}",
        "    enable_prefix_caching: false",
        "workload:",
        f"  trace: {{path: {json.dumps(os.path.abspath(trace))}}}",
        "policies:",
        "  - name: vllm",
        "    guards: []",
    ]
    return "\n".join(lines) + "\n"


def run_one(kvsim, run_id, trace, out, version, sets):
    folder = os.path.join(out, run_id)
    os.makedirs(folder, exist_ok=True)
    scenario = os.path.join(folder, "scenario.yaml")
    with open(scenario, "w") as f:
        f.write(scenario_yaml(run_id, trace, version))
    result = os.path.join(folder, "result")
    args = [kvsim, "run", scenario, "-o", result]
    for s in sets:
        args += ["--set", s]
    subprocess.run(args, check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(result, "summary.json")) as f:
        summary = json.load(f)
    p = summary["policies"][0]
    return {
        "run": run_id,
        "requests": p["requests_total"],
        "completed": p["outcomes"]["completed"],
        "ttft_mean_ms": p["ttft_s"]["mean"] * 1e3,
        "tpot_metrics_ms": p["tpot_metrics_s"] * 1e3,
        "e2e_mean_ms": p["e2e_s"]["mean"] * 1e3,
    }


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--apex", default="/work/shared/reference/measured/apex-plus")
    ap.add_argument("--kvsim", default=os.path.join(here, "..", "build", "kvsim"))
    ap.add_argument("--out", default="apex-replay")
    ap.add_argument("--vllm-version", default="0.6.0",
                    help="engine.vllm_version (0.6.0: the servers' own; 0.19.0: V1's host path)")
    ap.add_argument("--only", default="", help="run only the run ids containing this")
    ap.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                    help="passed to kvsim run (e.g. engine.async_scheduling=false)")
    a = ap.parse_args()
    served = os.path.join(a.apex, "served")
    runs = sorted(f[:-4] for f in os.listdir(served) if f.endswith(".csv") and a.only in f)
    rows = []
    for run_id in runs:
        rows.append(run_one(a.kvsim, run_id, os.path.join(served, run_id + ".csv"), a.out,
                            a.vllm_version, a.set))
        r = rows[-1]
        print(f"{run_id:34s} {r['completed']:5d}/{r['requests']:<5d} TTFT {r['ttft_mean_ms']:9.2f}"
              f"  TPOT {r['tpot_metrics_ms']:7.2f}  E2E {r['e2e_mean_ms']:10.2f} ms")
        sys.stdout.flush()
    with open(os.path.join(a.out, "figures.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()) if rows else ["run"])
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
