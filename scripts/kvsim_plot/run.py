"""The figures of a `kvsim run` folder: memory by category over time (memory), request outcomes
per policy (outcomes), and the TTFT / end-to-end latency CDFs (latency_cdf)."""
import math
import os

from . import engine
from .inputs import InputProblem, num, policies_in_order, read_csv, read_json
from .style import GIB, legend_in, line_style, panels

# Bottom to top of the memory stack: fixed costs first, then what the KV cache does with the rest.
MEMORY_CATEGORIES = [
    ("context", "CUDA context", "#999999"),
    ("weights", "weights", "#0072B2"),
    ("workspace", "workspace", "#56B4E9"),
    ("activations", "activations", "#009E73"),
    ("kv_live", "live KV", "#E69F00"),
    ("kv_waste", "KV waste", "#D55E00"),
    ("kv_free", "KV reserved, free", "#F0E442"),
    ("allocator_cache", "allocator cache", "#CC79A7"),
    ("free", "free", "#EEEEEE"),
]

OUTCOMES = [
    ("completed", "completed", "#009E73"),
    ("completed_truncated", "truncated", "#56B4E9"),
    ("rejected", "rejected", "#E69F00"),
    ("rejected_too_long", "too long", "#F0E442"),
    ("timed_out", "timed out", "#CC79A7"),
    ("lost_oom", "lost in OOM", "#D55E00"),
    ("failed_unavailable", "failed while down", "#0072B2"),
]


def clusters(times, gap_s):
    """Groups sorted times into [first, last] windows split where they are more than gap_s apart."""
    out = []
    for t in sorted(times):
        if out and t - out[-1][1] <= gap_s:
            out[-1][1] = t
        else:
            out.append([t, t])
    return out


def mine(rows, policy, replica):
    """The rows of one policy, and of one cluster replica when replica is set (docs/cluster.md)."""
    return [r for r in rows
            if r["policy"] == policy and (replica is None or r.get("replica") == replica)]


def run_events(requests, series, policy, replica=None):
    """Event times, which requests.csv does not record, derived from it and timeseries.csv: after
    each group of requests lost in an OOM, the crash is the first sample with nothing running or
    waiting and no live KV, and the restart window lasts until work is back. Rejections and
    truncations are marked at the request's arrival."""
    mine_requests = mine(requests, policy, replica)
    samples = [(num(r["t_s"]), num(r["running"], 0) + num(r["waiting"], 0),
                num(r["kv_live_bytes"], 0)) for r in mine(series, policy, replica)]
    windows = []
    lost = clusters([num(r["arrival_s"]) for r in mine_requests if r["outcome"] == "lost_oom"], 5.0)
    for first, _ in lost:
        after = [s for s in samples if s[0] > first]
        crash = next((t for t, work, kv in after if work == 0 and kv == 0), None)
        if crash is None or (windows and crash <= windows[-1][0]):
            continue  # no sample shows it, or lost in a crash already marked
        back = next((t for t, work, _ in after if t > crash and work > 0), after[-1][0])
        windows.append([crash, back])
    rejected = [num(r["arrival_s"]) for r in mine_requests
                if r["outcome"] in ("rejected", "rejected_too_long")]
    truncated = [num(r["arrival_s"]) for r in mine_requests
                 if r["outcome"] == "completed_truncated"]
    return windows, rejected, truncated


# A cluster policy's memory panels: its replicas with the highest in-use peak, at most this many.
MAX_REPLICA_PANELS = 4


def memory_panels(summary):
    """(policy, replica label or None, replica summary or None) per panel: one per policy, or, for
    a cluster policy, one per replica (the MAX_REPLICA_PANELS with the highest peak, in order)."""
    out = []
    for p in summary["policies"]:
        replicas = p.get("replicas")
        if not replicas:
            out.append((p["name"], None, None))
            continue
        worst = sorted(range(len(replicas)), key=lambda i: -replicas[i]["peak_in_use_bytes"])
        for i in sorted(worst[:MAX_REPLICA_PANELS]):
            out.append((p["name"], replicas[i]["replica"], replicas[i]))
    return out


# The offload tiers below the GPU (timeseries.csv, with engine.kv_offloading): column, label,
# colour.
TIER_LINES = [
    ("cpu_tier", "CPU tier (host memory)", "#000000"),
    ("disk_tier", "disk tier", "#882255"),
]


def plot_tiers(ax, rows, t):
    """The offload tiers' occupancy as dashed lines over the GPU stack, where the policy has them
    (their cells are empty for a policy without offloading)."""
    for key, label, colour in TIER_LINES:
        cells = [r.get(f"{key}_bytes") or "" for r in rows]
        if not rows or any(c == "" for c in cells):
            continue
        ax.plot(t, [num(c, 0.0) / GIB for c in cells], linestyle="--", linewidth=1.0,
                color=colour, label=label)


def plot_memory(plt, w, d, summary, series, requests):
    np = __import__("numpy")
    chosen = memory_panels(summary)
    n = len(chosen)
    fig, grid, lax = panels(plt, n, 1, 1.25, 0.7, sharex=True, sharey=True)
    axes = [row[0] for row in grid]
    for ax, (policy, replica, rs) in zip(axes, chosen):
        rows = mine(series, policy, replica)
        t = np.array([num(r["t_s"]) for r in rows])
        stack = [np.array([num(r[f"{k}_bytes"], 0.0) for r in rows]) / GIB
                 for k, _, _ in MEMORY_CATEGORIES]
        ax.stackplot(t, *stack, colors=[c for _, _, c in MEMORY_CATEGORIES],
                     labels=[l for _, l, _ in MEMORY_CATEGORIES], linewidth=0)
        plot_tiers(ax, rows, t)
        windows, rejected, truncated = run_events(requests, series, policy, replica)
        for i, (a, b) in enumerate(windows):
            ax.axvspan(a, b, facecolor="none", edgecolor="#888888", hatch="//", linewidth=0,
                       label="restart window" if i == 0 else None)
            ax.axvline(a, color="#000000", linewidth=0.8, label="OOM crash" if i == 0 else None)
        top = sum(s[0] for s in stack) if len(t) else 1.0
        if rejected:
            ax.plot(rejected, [top * 0.97] * len(rejected), linestyle="none", marker="|",
                    markersize=3, color="#000000", label="rejection")
        if truncated:
            ax.plot(truncated, [top * 0.92] * len(truncated), linestyle="none", marker="|",
                    markersize=3, color="#555555", label="truncation")
        p = next(x for x in summary["policies"] if x["name"] == policy)
        # Multi-GPU policies (summary.json gpu_layout): the stack is one GPU's of `gpus`.
        layout = p.get("gpu_layout") or {}
        gpus = layout.get("gpus", 1)
        where = (f", 1 of {gpus} GPUs (TP{layout.get('tensor_parallel', 1)}"
                 f"xPP{layout.get('pipeline_parallel', 1)})" if gpus > 1 else "")
        if rs is None:
            ax.set_title(f"{policy}: {p.get('oom_events', 0)} OOM, availability "
                         f"{100 * p.get('availability', 0):.1f}%{where}", loc="left")
        else:  # a cluster replica: its own OOMs and requests
            ax.set_title(f"{policy}, replica {replica} ({rs.get('gpu', '')}): "
                         f"{rs.get('oom_events', 0)} OOM, {rs.get('requests_total', 0)} requests",
                         loc="left")
        ax.set_ylabel("GiB per GPU" if gpus > 1 else "GiB")
        ax.margins(x=0, y=0)
        ax.grid(False)
    for ax in axes[:-1]:
        ax.tick_params(labelbottom=False)
    axes[-1].set_xlabel("simulated time (s)")
    legend_in(lax, axes, 3)
    multi = any((x.get("gpu_layout") or {}).get("gpus", 1) > 1 for x in summary["policies"])
    fig.suptitle("GPU memory by category" + (", per GPU" if multi else "") +
                 " (GiB = 2^30 bytes)")
    per = ("one panel per policy, per replica for a cluster (at most the "
           f"{MAX_REPLICA_PANELS} replicas with the highest peak)"
           if any(p.get("replicas") for p in summary["policies"]) else "one panel per policy")
    w.save(fig, "memory", "Device memory over time, stacked by category, " + per + " "
           "(shared axes). Black line: an OOM crash (the first sample with no work and no live KV "
           "after requests were lost in an OOM); hatched: the restart window until work is back; "
           "ticks: rejected and truncated arrivals. Dashed: the KV offload tiers' occupancy "
           "(CPU, disk), where a policy has them. Derived from requests.csv and timeseries.csv.",
           [os.path.join(d, "timeseries.csv"), os.path.join(d, "requests.csv"),
            os.path.join(d, "summary.json")])


def plot_outcomes(plt, w, d, summary):
    pols = summary["policies"]
    fig, grid, lax = panels(plt, 1, 1, 0.3 + 0.3 * len(pols), 0.45)
    ax = grid[0][0]
    y = list(range(len(pols)))[::-1]
    left = [0.0] * len(pols)
    for key, label, color in OUTCOMES:
        share = []
        for p in pols:
            total = max(1, p.get("requests_total", 0))
            share.append(100.0 * p.get("outcomes", {}).get(key, 0) / total)
        ax.barh(y, share, left=left, color=color, label=label, height=0.7, edgecolor="white",
                linewidth=0.3)
        left = [a + b for a, b in zip(left, share)]
    for yi, p in zip(y, pols):
        ax.text(101, yi,
                f"avail {100 * p.get('availability', 0):.1f}%\nn={p.get('requests_total', 0)}",
                va="center", fontsize=5.5)
    ax.set_yticks(y, [p["name"] for p in pols])
    ax.set_xlim(0, 125)
    ax.set_xticks([0, 25, 50, 75, 100])
    ax.set_xlabel("share of requests (%)")
    ax.grid(axis="y", visible=False)
    legend_in(lax, [ax], 3)
    ax.set_title("Request outcomes per policy", loc="left")
    w.save(fig, "outcomes", "Outcome of every request per policy as a share of the policy's "
           "requests; availability (completed or truncated, over all) and the request count on "
           "the right.", [os.path.join(d, "summary.json")])


def ecdf(values):
    v = sorted(values)
    n = len(v)
    return v, [(i + 1) / n for i in range(n)]


def plot_latency(plt, w, d, requests, long_tokens):
    policies = policies_in_order(requests)
    fig, axes, lax = panels(plt, 2, 2, 1.5, 0.45, sharey=True)
    for row, (metric, name) in enumerate([("ttft_s", "TTFT"), ("e2e_s", "end-to-end")]):
        for col, (is_long, which) in enumerate([(False, f"prompt ≤ {long_tokens}"),
                                                (True, f"prompt > {long_tokens}")]):
            ax = axes[row][col]
            drawn = 0
            for i, policy in enumerate(policies):
                vals = [num(r[metric]) for r in requests if r["policy"] == policy
                        and (num(r["prompt_tokens"], 0) > long_tokens) == is_long]
                vals = [v for v in vals if not math.isnan(v) and v > 0]
                if not vals:
                    continue
                x, yv = ecdf(vals)
                ax.step(x, yv, where="post", **line_style(i), label=policy)
                drawn += 1
            if drawn:
                ax.set_xscale("log")
            else:
                ax.text(0.5, 0.5, "no served requests", transform=ax.transAxes, ha="center",
                        va="center", fontsize=6, color="#666666")
            ax.set_title(f"{name}, {which}", loc="left", fontsize=6)
            ax.set_xlabel(f"{name} (s)")
            ax.set_ylim(0, 1.02)
        axes[row][0].set_ylabel("fraction of requests")
    legend_in(lax, [a for r in axes for a in r], 3)
    w.save(fig, "latency_cdf", f"Empirical CDFs of time to first token and end-to-end latency of "
           f"the requests that were served, per policy; short and long split at {long_tokens} "
           f"prompt tokens (--long-tokens).", [os.path.join(d, "requests.csv")])


def render(plt, w, d, opts):
    """Every figure of run folder d; opts.long_tokens splits short and long prompts."""
    summary = read_json(os.path.join(d, "summary.json"))
    if summary is None or "policies" not in summary:
        raise InputProblem(f"{d}/summary.json: missing or without 'policies'")
    series = read_csv(os.path.join(d, "timeseries.csv"))
    requests = read_csv(os.path.join(d, "requests.csv"))
    plot_memory(plt, w, d, summary, series, requests)
    plot_outcomes(plt, w, d, summary)
    plot_latency(plt, w, d, requests, opts.long_tokens)
    engine.plot_batch(plt, w, d, summary)
    engine.plot_breakdown(plt, w, d, summary)
