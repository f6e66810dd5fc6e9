"""The engine figures of a `kvsim run` folder: batch size, batch tokens
and iteration time histograms with busy share and MFU per policy (batch), and where a served
request's time goes, the mean of each latency-breakdown component per policy (breakdown). Both
read summary.json's `batch` and `latency_breakdown_mean_s` blocks; a folder written before they
existed draws neither."""
import os

from .style import legend_in, line_style, panels

BREAKDOWN = [
    ("guard_queue_s", "guard queue", "#999999"),
    ("engine_wait_s", "engine wait", "#E69F00"),
    ("prefill_s", "prefill", "#0072B2"),
    ("decode_s", "decode", "#009E73"),
    ("preempted_s", "preempted", "#D55E00"),
]

HISTOGRAMS = [
    ("batch_size", "batch size (sequences per iteration)", False),
    ("batch_tokens", "batch tokens (per iteration)", True),
    ("iteration_s", "iteration time (s)", True),
]


def plot_batch(plt, w, d, summary):
    pols = [p for p in summary["policies"] if p.get("batch", {}).get("iterations", 0) > 0]
    if not pols:
        return
    fig, grid, lax = panels(plt, len(HISTOGRAMS), 1, 1.0, 0.15 + 0.12 * len(pols))
    for row, (key, label, log_y) in enumerate(HISTOGRAMS):
        ax = grid[row][0]
        for i, p in enumerate(pols):
            h = p["batch"][key]["histogram"]
            edges, counts = h["edges"], h["counts"]
            total = max(1, sum(counts))
            share = [100.0 * c / total for c in counts]
            name = (f"{p['name']} (busy {100 * p['batch']['busy_share']:.0f}%, "
                    f"MFU {100 * p['batch']['mfu']:.1f}%)")
            ax.stairs(share, edges, **line_style(i), label=name if row == 0 else None)
        ax.set_xlabel(label)
        ax.set_ylabel("% of iterations")
        if log_y:  # prefill iterations are rare and long: a log axis keeps them visible
            ax.set_yscale("log")
    legend_in(lax, [grid[0][0]], 1)
    fig.suptitle("Batches per policy: distributions over iterations")
    w.save(fig, "batch", "Histograms over every iteration (forward pass) of its batch size, its "
           "tokens (prefill chunk tokens + one per decode) and its duration, per policy, as a "
           "share of the policy's iterations (at most 32 equal bins; iteration times from "
           "buckets within 0.5%; tokens and times on a log axis). Legend: busy share (time with an iteration in flight over the "
           "run's duration) and MFU (the latency model's FLOPs over the GPU's dense FP16 peak "
           "x duration).", [os.path.join(d, "summary.json")])


def plot_breakdown(plt, w, d, summary):
    pols = [p for p in summary["policies"] if "latency_breakdown_mean_s" in p]
    if not pols:
        return
    fig, grid, lax = panels(plt, 1, 1, 0.3 + 0.3 * len(pols), 0.45)
    ax = grid[0][0]
    y = list(range(len(pols)))[::-1]
    left = [0.0] * len(pols)
    for key, label, color in BREAKDOWN:
        vals = [p["latency_breakdown_mean_s"][key] for p in pols]
        ax.barh(y, vals, left=left, color=color, label=label, height=0.7, edgecolor="white",
                linewidth=0.3)
        left = [a + b for a, b in zip(left, vals)]
    for yi, p, total in zip(y, pols, left):
        ax.text(total, yi, f" {total:.3g} s, n={p['latency_breakdown_mean_s']['count']}",
                va="center", fontsize=5.5)
    ax.set_yticks(y, [p["name"] for p in pols])
    ax.set_xlim(0, max(left + [1e-9]) * 1.35)
    ax.set_xlabel("mean seconds per served request")
    ax.grid(axis="y", visible=False)
    legend_in(lax, [ax], 3)
    ax.set_title("Where a served request's time goes", loc="left")
    w.save(fig, "breakdown", "Mean over the served requests of each part of their end-to-end "
           "latency, per policy: waiting in a guard's queue, waiting in the engine before the "
           "first scheduling, prefill (to the first token), decode (to the last token) and time "
           "spent preempted; the parts of each request sum to its E2E (requests.csv).",
           [os.path.join(d, "summary.json")])
