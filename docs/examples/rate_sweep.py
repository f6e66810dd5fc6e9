#!/usr/bin/env python3
"""Sweeps the arrival rate of kvsim's default scenario with kvsim's Python module and draws, from the
sweep's DataFrame, each policy's availability and p99 TTFT against the rate.

    PYTHONPATH=build/python /usr/bin/python3 docs/examples/rate_sweep.py [OUT.png]

README.md's "From Python" section shows its output and figure."""

import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

import kvsim

# kvsim's default scenario (mixed chat and long-document requests on an A100-80GB, five
# policies), its `sweep:` block added here: the Poisson arrival rate from 0.25 to 4 requests/s.
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
with open(os.path.join(ROOT, "scenarios", "mixed-chat-docs.yaml")) as f:
    SCENARIO = f.read() + """
sweep:
  grid:
    workload.arrivals.rate: [0.25, 0.5, 1, 2, 4]
"""

out = sys.argv[1] if len(sys.argv) > 1 else "rate_sweep.png"
# 300 s of traffic per point; the points run on 4 threads, the GIL released.
sweep = kvsim.sweep(SCENARIO, jobs=4, set={"workload.duration_s": 300})
df = sweep.summary
print(df[["workload.arrivals.rate", "policy", "availability", "oom_events", "ttft_p99_s"]].to_string(index=False))

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
for policy, rows in df.groupby("policy", sort=False):
    left.plot(rows["workload.arrivals.rate"], rows["availability"], marker="o", label=policy)
    right.plot(rows["workload.arrivals.rate"], rows["ttft_p99_s"], marker="o", label=policy)
left.set(xlabel="arrival rate (req/s)", ylabel="availability", xscale="log", ylim=(0, 1.05))
right.set(xlabel="arrival rate (req/s)", ylabel="p99 TTFT (s)", xscale="log", yscale="log")
rates = sorted(df["workload.arrivals.rate"].unique())
for ax in (left, right):
    ax.set_xticks(rates, ["%g" % r for r in rates])
    ax.minorticks_off()
    ax.grid(alpha=0.3)
left.legend(fontsize=8)
fig.suptitle("mixed-chat-docs on an A100-80GB, by arrival rate (kvsim %s)" % kvsim.__version__)
fig.tight_layout()
fig.savefig(out, dpi=110)
print("figure:", out)
