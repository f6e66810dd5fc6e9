#!/usr/bin/env python3
"""Per-layer error of kvsim on an imported Vidur folder, by token-count bin.

Usage: validate/vidur_layer_report.py DIR [DIR...]   (DIR: `kvsim-validate import vidur` output
on which `kvsim-validate compare DIR --profile P` has run). Joins DIR/compare.csv (held-out rows,
in measurements.csv order) with DIR/vidur_ops.csv and sums, per token count, the measured and
predicted times of one decoder layer's non-attention operations as Vidur times them: the four
GEMMs, two norms, rotary, activation and ONE residual add (the embedding, once per forward pass,
is left out). Prints MAPE and signed mean error overall and per bin, for the GEMMs alone and for
all non-attention operations. Standard library only.
"""
import csv
import os
import sys

BINS = [(1, 4), (8, 64), (72, 256), (264, 1024), (1040, 4096), (4097, 10**12)]
GEMMS = {"attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"}


def layer_sums(d):
    with open(os.path.join(d, "measurements.csv")) as f:
        splits = [r["split"] for r in csv.DictReader(f)]
    with open(os.path.join(d, "vidur_ops.csv")) as f:
        ops = list(csv.DictReader(f))
    with open(os.path.join(d, "compare.csv")) as f:
        cmp_rows = list(csv.DictReader(f))
    test_ops = [o for o, s in zip(ops, splits) if s == "test"]
    if len(test_ops) != len(cmp_rows):
        sys.exit(f"{d}: {len(cmp_rows)} compare rows for {len(test_ops)} test rows; rerun compare")
    sums = {}
    for o, c in zip(test_ops, cmp_rows):
        if o["vidur_op"] == "emb":
            continue
        t = int(o["num_tokens"])
        s = sums.setdefault(t, [0.0, 0.0, 0.0, 0.0])  # gemm measured, predicted, all m, all p
        m, p = float(c["measured_s"]), float(c["predicted_s"])
        if o["vidur_op"] in GEMMS:
            s[0] += m
            s[1] += p
        s[2] += m
        s[3] += p
    return sums


def line(errs):
    out = "MAPE %5.1f%% signed %+5.1f%% |" % (
        100 * sum(abs(e) for _, e in errs) / len(errs), 100 * sum(e for _, e in errs) / len(errs))
    for a, b in BINS:
        v = [e for t, e in errs if a <= t <= b]
        out += " %s: %s |" % (f"{a}-{b}" if b < 10**12 else f">{a - 1}",
                              "%.1f%%" % (100 * sum(abs(x) for x in v) / len(v)) if v else "-")
    return out


for d in sys.argv[1:]:
    sums = layer_sums(d)
    g = [(t, s[1] / s[0] - 1) for t, s in sorted(sums.items())]
    a = [(t, s[3] / s[2] - 1) for t, s in sorted(sums.items())]
    print(f"{d}: {len(sums)} held-out token counts")
    print("  GEMMs only      " + line(g))
    print("  non-attention   " + line(a))
