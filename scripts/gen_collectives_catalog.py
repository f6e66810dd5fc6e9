#!/usr/bin/python3
"""Writes models/catalog/collectives.yaml from the shared measured collective CSVs.

Usage: /usr/bin/python3 scripts/gen_collectives_catalog.py [DATA_DIR] [OUT_YAML]
  DATA_DIR defaults to ../shared/reference/measured/collectives (relative to the repository),
  OUT_YAML to models/catalog/collectives.yaml. Prints the leave-one-out interpolation error per
  GPU and curve family (the table in docs/latency.md "Collectives").

The output is deterministic: rows are read in file order, grouped by (world size, size), and a
group's time is the median of its rows (aiconfigurator repeats some sweeps; Vidur's send/recv
rows are bucketed by power-of-two size). Times are written in microseconds.
"""
import csv
import math
import os
import statistics
import sys

AIC_COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
AIC_PATH = "aic-core/src/aiconfigurator_core/systems/data/{gpu}/comm/{framework}/{version}/{table}.parquet"
VIDUR_COMMIT = "7d47513363ec447a741ac5e47241580b47724fbf"

# aiconfigurator's GPU folder -> kvsim catalog key; the vLLM version whose curves are kept (the
# newest measured; L40S's 0.22 folder repeats 0.14's rows).
GPUS = {
    "a100_sxm": ("a100-sxm4-80gb", "0.14.0"),
    "h100_sxm": ("h100-sxm", "0.24.0"),
    "h200_sxm": ("h200", "0.24.0"),
    "b200_sxm": ("b200", "0.24.0"),
    "gb200": ("gb200", "0.24.0"),
    "l40s": ("l40s", "0.14.0"),
    "rtx_pro_6000_server": ("rtx-pro-6000", "0.24.0"),
}
# Series measured without GPU peer-to-peer (the README's caveat c): kept as p2p: false curves.
NO_P2P = {"rtx_pro_6000_server": "0.19.0"}
# Vidur's NCCL send/recv (intra-node rows: devices_per_node == num_workers).
VIDUR_SEND_RECV = {"a100_dgx": "a100-sxm4-80gb", "h100_dgx": "h100-sxm"}
NCCL_OPS = {"all_reduce": "nccl_allreduce", "all_gather": "all_gather",
            "reduce_scatter": "reduce_scatter"}


def version_key(v):
    try:
        return tuple(int(x) for x in v.split("."))
    except ValueError:
        return None


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def table(points):
    """[(bytes, us)] grouped by size, the median of each group, sorted by size."""
    groups = {}
    for b, us in points:
        groups.setdefault(b, []).append(us)
    return [(b, statistics.median(v)) for b, v in sorted(groups.items())]


def vllm_curves(data, folder, version, p2p):
    path = os.path.join(data, "aiconfigurator", f"{folder}__vllm_{version}__custom_allreduce_perf.csv")
    out = {}
    for r in rows(path):
        mode = r["backend"].removeprefix("vllm_")
        key = ("allreduce", mode, int(r["num_gpus"]), p2p)
        out.setdefault(key, []).append((int(r["message_bytes"]), float(r["latency"]) * 1e3))
    src = f"aiconfigurator@{AIC_COMMIT[:12]} " + AIC_PATH.format(
        gpu=folder, framework="vllm", version=version, table="custom_allreduce_perf")
    return {k: (table(v), f"vLLM {version} tensor_model_parallel_all_reduce, bf16", src)
            for k, v in out.items()}


def nccl_curves(data, folder):
    files = [f for f in sorted(os.listdir(os.path.join(data, "aiconfigurator")))
             if f.startswith(folder + "__nccl_") and f.endswith("__nccl_perf.csv")]
    best, all_rows = None, []
    for f in files:
        for r in rows(os.path.join(data, "aiconfigurator", f)):
            v = version_key(r.get("version", ""))
            if v is None or r.get("nccl_dtype") != "half" or r.get("op_name") not in NCCL_OPS:
                continue
            all_rows.append((v, f, r))
            best = v if best is None or v > best else best
    out, files_used = {}, set()
    for v, f, r in all_rows:
        if v != best:
            continue
        files_used.add(f.split("__")[1])
        key = (NCCL_OPS[r["op_name"]], "eager", int(r["num_gpus"]), True)
        out.setdefault(key, []).append((int(r["message_bytes"]), float(r["latency"]) * 1e3))
    version = ".".join(str(x) for x in best)
    src = f"aiconfigurator@{AIC_COMMIT[:12]} " + ", ".join(
        AIC_PATH.format(gpu=folder, framework="nccl", version=u.removeprefix("nccl_"), table="nccl_perf")
        for u in sorted(files_used))
    return {k: (table(v), f"NCCL {version} nccl-tests {k[0]}, half, no CUDA graph", src)
            for k, v in out.items()}


def send_recv_curve(data, name):
    pts = []
    for r in rows(os.path.join(data, "vidur", f"{name}_send_recv.csv")):
        if r["devices_per_node"] != r["num_workers"]:
            continue  # ranks on different nodes
        size = int(r["size"])
        pts.append((2 ** int(math.log2(size)), size, float(r["time_stats.send_recv.median"]) * 1e3))
    buckets = {}
    for bucket, size, us in pts:
        buckets.setdefault(bucket, []).append((size, us))
    reduced = [(int(statistics.median(s for s, _ in v)), statistics.median(u for _, u in v))
               for _, v in sorted(buckets.items())]
    src = f"vidur@{VIDUR_COMMIT[:12]} data/profiling/network/{name}/send_recv.csv"
    return {("send_recv", "eager", 2, True):
            (reduced, "NCCL send/recv kernel time (torch.distributed, fp16), median per power-of-two bucket", src)}


def interpolate(pts, b):
    """The C++ rule (models/latency/collective_curve.cc): linear in bytes between neighbours,
    the first point's time below it, the last segment extended above."""
    if b <= pts[0][0]:
        return pts[0][1]
    for (b0, t0), (b1, t1) in zip(pts, pts[1:]):
        if b <= b1:
            return t0 + (t1 - t0) * (b - b0) / (b1 - b0)
    (b0, t0), (b1, t1) = pts[-2], pts[-1]
    return t1 + (t1 - t0) * (b - b1) / (b1 - b0)


def leave_one_out(pts):
    """Relative errors of each interior point predicted from the table without it."""
    return [abs(interpolate(pts[:i] + pts[i + 1:], pts[i][0]) / pts[i][1] - 1)
            for i in range(1, len(pts) - 1)]


def fmt_us(x):
    return f"{x:.4g}"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "shared", "reference", "measured", "collectives")
    out_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "models", "catalog", "collectives.yaml")
    catalog = {}
    for folder, (key, version) in GPUS.items():
        curves = vllm_curves(data, folder, version, True)
        if folder in NO_P2P:
            curves.update(vllm_curves(data, folder, NO_P2P[folder], False))
        curves.update(nccl_curves(data, folder))
        catalog[key] = curves
    for name, key in VIDUR_SEND_RECV.items():
        catalog[key].update(send_recv_curve(data, name))

    lines = [
        "# Measured collective times per GPU (generated by scripts/gen_collectives_catalog.py from",
        "# ../shared/reference/measured/collectives; do not edit by hand). Each curve is a table of",
        "# (message bytes, microseconds) points; kvsim interpolates linearly in bytes between",
        "# neighbours (docs/latency.md \"Collectives\"). op: allreduce (vLLM's own TP all-reduce entry",
        "# point, whatever path that vLLM picked), nccl_allreduce / all_gather / reduce_scatter",
        "# (nccl-tests: size is the whole buffer), send_recv (NCCL point-to-point). mode: graph",
        "# (replayed in a CUDA graph) or eager. p2p: false marks a series measured without GPU",
        "# peer-to-peer access.",
    ]
    errors = {}
    for key in sorted(catalog):
        lines.append(f"{key}:")
        for (op, mode, world, p2p), (pts, what, src) in sorted(catalog[key].items()):
            lines.append(f"  - {{op: {op}, mode: {mode}, world: {world}, p2p: {'true' if p2p else 'false'},")
            lines.append(f"     what: \"{what}\",")
            lines.append(f"     source: \"{src}\",")
            lines.append("     points: [" + ", ".join(f"[{b}, {fmt_us(t)}]" for b, t in pts) + "]}")
            rounded = [(b, float(fmt_us(t))) for b, t in pts]
            family = f"{op}/{mode}" + ("" if p2p else "/no-p2p")
            errors.setdefault((key, family), []).extend(leave_one_out(rounded))
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("| GPU | curves | interior points | leave-one-out error: median | max |")
    print("|---|---|---|---|---|")
    for (key, family), e in sorted(errors.items()):
        print(f"| {key} | {family} | {len(e)} | {100 * statistics.median(e):.1f}% | {100 * max(e):.1f}% |")


if __name__ == "__main__":
    main()
