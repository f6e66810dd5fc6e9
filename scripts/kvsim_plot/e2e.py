"""The figure of a `kvsim-validate e2e` folder (e2e.json): the latency model against the measured
replay, per iteration (modeled against measured time of the same batch, log-log with y = x) and
per request (the TTFT and TPOT CDFs of both runs overlaid, each policy a colour, modeled dashed)."""
import math
import os

from .inputs import num, policies_in_order, read_csv, read_json
from .style import class_marker, legend_in, line_color, panels, COLUMN_IN

SHAPES = ["prefill-only", "decode-only", "mixed"]


def shape_of(r):
    p, d = num(r["prefill_seqs"], 0) > 0, num(r["decode_seqs"], 0) > 0
    return "mixed" if p and d else "prefill-only" if p else "decode-only"


def log_axis(ax, which):
    """A log axis whose minor ticks carry no labels: short ranges would overprint them."""
    from matplotlib.ticker import NullFormatter
    getattr(ax, f"set_{which}scale")("log")
    getattr(ax, f"{which}axis").set_minor_formatter(NullFormatter())


def ecdf(values):
    v = sorted(values)
    return v, [(i + 1) / len(v) for i in range(len(v))]


def render(plt, w, d, opts):
    summary = read_json(os.path.join(d, "e2e.json")) or {}
    it_path = os.path.join(d, "measured", "iterations.csv")
    mod_path = os.path.join(d, "modeled", "requests.csv")
    mea_path = os.path.join(d, "measured", "requests.csv")
    iters = read_csv(it_path)
    modeled, measured = read_csv(mod_path), read_csv(mea_path)
    mape = {g["group"]: g["mape"] for g in summary.get("iterations", [])}

    fig, grid, lax = panels(plt, 1, 3, 1.9, 0.55, width=2 * COLUMN_IN)
    ax = grid[0][0]
    lo, hi = float("inf"), 0.0
    for i, shape in enumerate(SHAPES):
        rows = [r for r in iters if shape_of(r) == shape]
        if not rows:
            continue
        x = [num(r["measured_s"]) * 1e3 for r in rows]
        y = [num(r["modeled_s"]) * 1e3 for r in rows]
        label = shape + (f": MAPE {100 * mape[shape]:.1f}%" if shape in mape else "")
        ax.scatter(x, y, s=6, marker=class_marker(i), color=line_color(i), label=label,
                   linewidths=0)
        lo, hi = min([lo] + x + y), max([hi] + x + y)
    if hi > 0:
        ax.plot([lo, hi], [lo, hi], color="#000000", linewidth=0.8, label="y = x")
        log_axis(ax, "x")
        log_axis(ax, "y")
    ax.set_xlabel("measured iteration (ms)")
    ax.set_ylabel("modeled iteration (ms)")
    overall = mape.get("all")
    ax.set_title("Iterations" + (f": MAPE {100 * overall:.1f}%" if overall is not None else ""),
                 loc="left")

    policies = policies_in_order(measured)
    for col, (metric, name) in enumerate([("ttft_s", "TTFT"), ("tpot_s", "TPOT")], start=1):
        ax = grid[0][col]
        drawn = 0
        for i, policy in enumerate(policies):
            for rows, side, style in ((measured, "measured", "-"), (modeled, "modeled", "--")):
                vals = [num(r[metric]) for r in rows if r["policy"] == policy]
                vals = [v * 1e3 for v in vals if not math.isnan(v) and v > 0]
                if not vals:
                    continue
                x, yv = ecdf(vals)
                ax.step(x, yv, where="post", color=line_color(i), linestyle=style,
                        label=f"{policy} {side}")
                drawn += 1
        if drawn:
            log_axis(ax, "x")
        ax.set_title(f"{name} CDF", loc="left")
        ax.set_xlabel(f"{name} (ms)")
        ax.set_ylim(0, 1.02)
    grid[0][1].set_ylabel("fraction of requests")
    legend_in(lax, [a for r in grid for a in r], 4)
    w.save(fig, "e2e", "kvsim's latency model against the measured replay of the same scenario "
           "(kvsim-validate e2e). Left: each iteration's modeled time against its measured time "
           "(same batch), log-log with the y = x line, MAPE per batch shape. Middle and right: "
           "TTFT and TPOT CDFs of the requests both runs served, measured solid, modeled dashed.",
           [it_path, mod_path, mea_path, os.path.join(d, "e2e.json")])
