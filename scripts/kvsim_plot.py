#!/usr/bin/python3
"""Renders the figures of a kvsim result folder: a run, a sweep or a kvsim-validate folder.

    kvsim_plot.py DIR [-o PLOTDIR] [--format png|svg|pdf] [--long-tokens N]
    kvsim_plot.py --kind kv|latency|plausibility --data DATA.json -o FIG.png|svg|pdf

The second form draws one figure from the JSON that `kvsim kv|latency|plausibility --plot FIG`
writes beside FIG (FIG's name with .json): KV bytes against sequence length for MHA/GQA/MQA,
latency estimate against the physical bound, or published claims against both.

Every figure is a pure function of the files in DIR: the style is fixed here (not read from the
user's matplotlibrc), and the PNG/SVG/PDF metadata that would carry a date or a random id is
pinned, so rendering twice gives identical bytes. Each figure FIG.<ext> gets FIG.txt beside it:
its caption, the files it came from and the scenario hash in DIR's manifest.

Needs Debian's python3-matplotlib (scripts/setup.sh installs it). Edit freely: `kvsim plot` only
runs this file. Exit codes: 0 ok, 2 bad input or missing matplotlib.
"""
import argparse
import csv
import hashlib
import json
import math
import os
import sys

GIB = float(1 << 30)

# Okabe & Ito (2008), safe for the common colour-vision deficiencies.
OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7",
             "#000000"]
# Lines skip the yellow, which vanishes on white.
LINE_COLORS = ["#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#000000"]
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1))]

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

COLUMN_IN = 3.5  # one column of a two-column paper
DPI = 200


def panels(plt, nrows, ncols, panel_h, legend_h, width=COLUMN_IN, sharex=False, sharey=False):
    """A figure of nrows x ncols panels plus a row below for the legend (kept inside the fixed
    figure size, so every render has the same pixel size)."""
    fig = plt.figure(figsize=(width, panel_h * nrows + legend_h + 0.3), constrained_layout=True)
    gs = fig.add_gridspec(nrows + 1, ncols, height_ratios=[panel_h] * nrows + [legend_h])
    axes = [[None] * ncols for _ in range(nrows)]
    for r in range(nrows):
        for c in range(ncols):
            first = axes[0][0]
            axes[r][c] = fig.add_subplot(gs[r, c], sharex=first if sharex and first else None,
                                         sharey=first if sharey and first else None)
    lax = fig.add_subplot(gs[nrows, :])
    lax.axis("off")
    return fig, axes, lax


def legend_in(lax, axes, ncol):
    """One legend of every distinct label in `axes`, drawn in the legend row."""
    handles, labels = [], []
    for ax in axes:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    if handles:
        lax.legend(handles, labels, loc="center", ncol=ncol, frameon=False)


class InputProblem(Exception):
    """Bad or missing input: reported as one line, exit 2."""


def fixed_style(plt):
    import matplotlib
    matplotlib.rcdefaults()  # ignore any user matplotlibrc: same bytes on every machine
    plt.rcParams.update({
        "font.family": "DejaVu Sans",
        "font.size": 7,
        "axes.titlesize": 7,
        "axes.labelsize": 7,
        "legend.fontsize": 6,
        "xtick.labelsize": 6,
        "ytick.labelsize": 6,
        "axes.prop_cycle": matplotlib.cycler(color=OKABE_ITO),
        "axes.grid": True,
        "grid.color": "#DDDDDD",
        "grid.linewidth": 0.4,
        "lines.linewidth": 1.0,
        "savefig.dpi": DPI,
        "figure.dpi": DPI,
        "svg.hashsalt": "kvsim",  # SVG ids from a fixed salt, not a random one
        "svg.fonttype": "path",
        "pdf.fonttype": 42,
        "path.simplify": False,
    })


def read_csv(path):
    if not os.path.isfile(path):
        raise InputProblem(f"{path}: missing")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_json(path):
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise InputProblem(f"{path}: not JSON: {e}")


def num(s, default=float("nan")):
    try:
        return float(s)
    except (TypeError, ValueError):
        return default


def files_sha256(paths):
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(os.path.basename(p).encode() + b"\0")
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


class Writer:
    """Saves figures with pinned metadata and writes each one's caption sidecar."""

    def __init__(self, plt, out_dir, fmt, provenance):
        self.plt, self.out_dir, self.fmt, self.provenance = plt, out_dir, fmt, provenance
        self.written = []

    def save(self, fig, name, caption, sources):
        path = os.path.join(self.out_dir, f"{name}.{self.fmt}")
        metadata = {
            "png": {"Software": None},
            "svg": {"Date": None, "Creator": None},
            "pdf": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
        }[self.fmt]
        fig.savefig(path, format=self.fmt, metadata=metadata)
        self.plt.close(fig)
        rel = [os.path.relpath(s, self.provenance["dir"]) for s in sources]
        text = (f"{caption}\n\nsource: {', '.join(sorted(rel))}\n"
                f"scenario_hash: {self.provenance['scenario_hash']}\n"
                f"data_sha256: {files_sha256(sources)}\n")
        with open(os.path.join(self.out_dir, f"{name}.txt"), "w") as f:
            f.write(text)
        self.written.append(path)


# ---- runs ----------------------------------------------------------------------------------

def policies_in_order(rows):
    seen = []
    for r in rows:
        if r["policy"] not in seen:
            seen.append(r["policy"])
    return seen


def clusters(times, gap_s):
    """Groups sorted times into [first, last] windows split where they are more than gap_s apart."""
    out = []
    for t in sorted(times):
        if out and t - out[-1][1] <= gap_s:
            out[-1][1] = t
        else:
            out.append([t, t])
    return out


def run_events(requests, series, policy):
    """Event times, which requests.csv does not record, derived from it and timeseries.csv: after
    each group of requests lost in an OOM, the crash is the first sample with nothing running or
    waiting and no live KV, and the restart window lasts until work is back. Rejections and
    truncations are marked at the request's arrival."""
    mine = [r for r in requests if r["policy"] == policy]
    samples = [(num(r["t_s"]), num(r["running"], 0) + num(r["waiting"], 0),
                num(r["kv_live_bytes"], 0)) for r in series if r["policy"] == policy]
    windows = []
    lost = clusters([num(r["arrival_s"]) for r in mine if r["outcome"] == "lost_oom"], 5.0)
    for first, _ in lost:
        after = [s for s in samples if s[0] > first]
        crash = next((t for t, work, kv in after if work == 0 and kv == 0), None)
        if crash is None or (windows and crash <= windows[-1][0]):
            continue  # no sample shows it, or lost in a crash already marked
        back = next((t for t, work, _ in after if t > crash and work > 0), after[-1][0])
        windows.append([crash, back])
    rejected = [num(r["arrival_s"]) for r in mine
                if r["outcome"] in ("rejected", "rejected_too_long")]
    truncated = [num(r["arrival_s"]) for r in mine if r["outcome"] == "completed_truncated"]
    return windows, rejected, truncated


def plot_memory(plt, w, d, summary, series, requests):
    np = __import__("numpy")
    policies = [p["name"] for p in summary["policies"]]
    n = len(policies)
    fig, grid, lax = panels(plt, n, 1, 1.25, 0.7, sharex=True, sharey=True)
    axes = [row[0] for row in grid]
    for ax, policy in zip(axes, policies):
        rows = [r for r in series if r["policy"] == policy]
        t = np.array([num(r["t_s"]) for r in rows])
        stack = [np.array([num(r[f"{k}_bytes"], 0.0) for r in rows]) / GIB
                 for k, _, _ in MEMORY_CATEGORIES]
        ax.stackplot(t, *stack, colors=[c for _, _, c in MEMORY_CATEGORIES],
                     labels=[l for _, l, _ in MEMORY_CATEGORIES], linewidth=0)
        windows, rejected, truncated = run_events(requests, series, policy)
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
        ax.set_title(f"{policy}: {p.get('oom_events', 0)} OOM, availability "
                     f"{100 * p.get('availability', 0):.1f}%", loc="left")
        ax.set_ylabel("GiB")
        ax.margins(x=0, y=0)
        ax.grid(False)
    for ax in axes[:-1]:
        ax.tick_params(labelbottom=False)
    axes[-1].set_xlabel("simulated time (s)")
    legend_in(lax, axes, 3)
    fig.suptitle("GPU memory by category (GiB = 2^30 bytes)")
    w.save(fig, "memory", "Device memory over time, stacked by category, one panel per policy "
           "(shared axes). Black line: an OOM crash (the first sample with no work and no live KV "
           "after requests were lost in an OOM); hatched: the restart window until work is back; "
           "ticks: rejected and truncated arrivals. Derived from requests.csv and timeseries.csv.",
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
                ax.step(x, yv, where="post", color=LINE_COLORS[i % len(LINE_COLORS)],
                        linestyle=LINESTYLES[i % len(LINESTYLES)], label=policy)
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


def render_run(plt, w, d, long_tokens):
    summary = read_json(os.path.join(d, "summary.json"))
    if summary is None or "policies" not in summary:
        raise InputProblem(f"{d}/summary.json: missing or without 'policies'")
    series = read_csv(os.path.join(d, "timeseries.csv"))
    requests = read_csv(os.path.join(d, "requests.csv"))
    plot_memory(plt, w, d, summary, series, requests)
    plot_outcomes(plt, w, d, summary)
    plot_latency(plt, w, d, requests, long_tokens)


# ---- sweeps --------------------------------------------------------------------------------

SWEEP_METRICS = [
    ("availability", "availability (%)", 100.0),
    ("oom_events", "OOM events", 1.0),
    ("e2e_p99_s", "p99 end-to-end latency (s)", 1.0),
    ("tokens_dropped", "tokens dropped", 1.0),
]


def ordered_values(values):
    """Distinct values in numeric order when all are numbers, else in order of appearance."""
    distinct = list(dict.fromkeys(values))
    if all(not math.isnan(num(v)) for v in distinct):
        return sorted(distinct, key=num)
    return distinct


def render_sweep(plt, w, d):
    np = __import__("numpy")
    path = os.path.join(d, "summary.csv")
    rows = read_csv(path)
    if not rows or "policy" not in rows[0]:
        raise InputProblem(f"{path}: no rows, or no 'policy' column")
    cols = list(rows[0].keys())
    keys = [c for c in cols[:cols.index("policy")] if c != "point"]
    if not keys:
        raise InputProblem(f"{path}: no swept-key columns before 'policy'")
    policies = policies_in_order(rows)
    for metric, label, scale in SWEEP_METRICS:
        if metric not in cols:
            continue
        if len(keys) == 1:
            fig, grid, lax = panels(plt, 1, 1, 2.0, 0.45)
            ax = grid[0][0]
            xs = ordered_values([r[keys[0]] for r in rows])
            numeric = all(not math.isnan(num(x)) for x in xs)
            for i, policy in enumerate(policies):
                by_x = {r[keys[0]]: num(r[metric]) * scale for r in rows if r["policy"] == policy}
                xv = [num(x) if numeric else j for j, x in enumerate(xs) if x in by_x]
                ax.plot(xv, [by_x[x] for x in xs if x in by_x], marker="o", markersize=2.5,
                        color=LINE_COLORS[i % len(LINE_COLORS)],
                        linestyle=LINESTYLES[i % len(LINESTYLES)], label=policy)
            if not numeric:
                ax.set_xticks(range(len(xs)), xs)
            ax.set_xlabel(keys[0])
            ax.set_ylabel(label)
            legend_in(lax, [ax], 3)
            caption = f"{label} against {keys[0]}, one line per policy."
        else:
            kx, ky = keys[0], keys[1]
            xs = ordered_values([r[kx] for r in rows])
            ys = ordered_values([r[ky] for r in rows])
            rest = {k: rows[0][k] for k in keys[2:]}
            n = len(policies)
            fig, grid, _ = panels(plt, n, 1, 1.5, 0.01)
            for ax, policy in zip([row[0] for row in grid], policies):
                grid = np.full((len(ys), len(xs)), np.nan)
                for r in rows:
                    if r["policy"] != policy or any(r[k] != v for k, v in rest.items()):
                        continue
                    grid[ys.index(r[ky]), xs.index(r[kx])] = num(r[metric]) * scale
                im = ax.imshow(grid, origin="lower", aspect="auto", cmap="cividis",
                               interpolation="nearest")
                for (yi, xi), v in np.ndenumerate(grid):
                    if not np.isnan(v):
                        ax.text(xi, yi, f"{v:.3g}", ha="center", va="center", fontsize=5,
                                color="white" if v < np.nanmean(grid) else "black")
                ax.set_xticks(range(len(xs)), xs)
                ax.set_yticks(range(len(ys)), ys)
                ax.set_xlabel(kx)
                ax.set_ylabel(ky)
                ax.set_title(policy, loc="left")
                ax.grid(False)
                fig.colorbar(im, ax=ax, label=label)
            fixed = "; ".join(f"{k}={v}" for k, v in rest.items())
            caption = (f"{label} over {kx} and {ky}, one panel per policy"
                       + (f" (other swept keys fixed at {fixed})" if fixed else "") + ".")
        fig.suptitle(f"Sweep: {label}")
        w.save(fig, f"sweep_{metric}", caption, [path])


# ---- calibration (kvsim-validate) ----------------------------------------------------------

CLASS_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def render_validate(plt, w, d):
    compare = os.path.join(d, "compare.csv")
    if os.path.isfile(compare):
        rows = read_csv(compare)
        summary = read_json(os.path.join(d, "compare.json")) or {}
        classes = list(dict.fromkeys(r["kernel"] for r in rows))
        fig, grid, lax = panels(plt, 1, 1, 2.6, 0.5)
        ax = grid[0][0]
        lo, hi = float("inf"), 0.0
        for i, c in enumerate(classes):
            mine = [r for r in rows if r["kernel"] == c]
            m = [num(r["measured_s"]) * 1e6 for r in mine]
            p = [num(r["predicted_s"]) * 1e6 for r in mine]
            errs = [abs(num(r["error_pct"])) for r in mine]
            mape = summary.get("by_class", {}).get(c)
            mape_pct = 100 * mape if mape is not None else sum(errs) / max(1, len(errs))
            ax.scatter(m, p, s=8, marker=CLASS_MARKERS[i % len(CLASS_MARKERS)],
                       color=LINE_COLORS[i % len(LINE_COLORS)], label=f"{c}: MAPE {mape_pct:.1f}%",
                       linewidths=0)
            lo, hi = min([lo] + m + p), max([hi] + m + p)
        if hi > 0:
            ax.plot([lo, hi], [lo, hi], color="#000000", linewidth=0.8, label="y = x")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured time (µs)")
        ax.set_ylabel("predicted time (µs)")
        overall = summary.get("mape")
        ax.set_title("Latency model on held-out kernels" +
                     (f": MAPE {100 * overall:.1f}%" if overall is not None else ""), loc="left")
        legend_in(lax, [ax], 2)
        w.save(fig, "calibration", "kvsim's latency estimate against the measured time of each "
               "held-out kernel, log-log, with the y = x line; MAPE per kernel class in the "
               "legend.",
               [p for p in (compare, os.path.join(d, "compare.json")) if os.path.isfile(p)])
    meas = os.path.join(d, "measurements.csv")
    if os.path.isfile(meas):
        render_roofline(plt, w, d, meas)


def render_roofline(plt, w, d, meas):
    rows = [r for r in read_csv(meas)
            if num(r.get("flops"), 0) > 0 and num(r.get("bytes_moved"), 0) > 0
            and num(r.get("seconds"), 0) > 0]
    manifest = read_json(os.path.join(d, "manifest.json")) or {}
    spec = manifest.get("gpu_spec", {})
    peak_flops, peak_bw = num(spec.get("fp16_flops")), num(spec.get("hbm_bytes_per_s"))
    fig, grid, lax = panels(plt, 1, 1, 2.4, 0.45)
    ax = grid[0][0]
    classes = list(dict.fromkeys(r["kernel"] for r in rows))
    # TFLOP/s for GPUs; a CPU backend's run reads better in GFLOP/s.
    best = max([num(r["flops"]) / num(r["seconds"]) for r in rows]
               + [peak_flops if peak_flops > 0 else 0.0])
    unit, div = ("TFLOP/s", 1e12) if best >= 1e12 else ("GFLOP/s", 1e9)
    intens = []
    for i, c in enumerate(classes):
        mine = [r for r in rows if r["kernel"] == c]
        x = [num(r["flops"]) / num(r["bytes_moved"]) for r in mine]
        y = [num(r["flops"]) / num(r["seconds"]) / div for r in mine]
        intens += x
        ax.scatter(x, y, s=8, marker=CLASS_MARKERS[i % len(CLASS_MARKERS)],
                   color=LINE_COLORS[i % len(LINE_COLORS)], label=c, linewidths=0)
    if intens and peak_flops > 0 and peak_bw > 0:
        lo, hi = min(intens) / 2, max(intens) * 2
        ridge = peak_flops / peak_bw
        xs = sorted({lo, hi, min(max(ridge, lo), hi)})
        ax.plot(xs, [min(peak_flops, peak_bw * x) / div for x in xs], color="#000000",
                linewidth=0.8, label=f"roofline ({spec.get('name', 'gpu')})")
    if rows:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel(f"achieved {unit} ({'10^12' if div == 1e12 else '10^9'} FLOP/s)")
    ax.set_title("Roofline of the measured kernels", loc="left")
    legend_in(lax, [ax], 3)
    w.save(fig, "roofline", "Achieved throughput of every measured kernel against its arithmetic "
           "intensity, under the roofline of the peaks in manifest.json's gpu_spec.",
           [p for p in (meas, os.path.join(d, "manifest.json")) if os.path.isfile(p)])


# ---- calculators: kvsim kv / latency / plausibility --plot ---------------------------------

def seq_axis(ax, seqs):
    """Sequence length on a log2 axis, ticks at the lengths asked for, written 4K / 32K."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(seqs)
    ax.set_xticklabels([f"{s // 1024}K" if s >= 1024 and s % 1024 == 0 else str(s)
                        for s in seqs])
    ax.minorticks_off()
    ax.set_xlabel("sequence length (tokens)")


def plain_log_y(ax):
    """Log y axis labelled 1, 2, 5 per decade in plain numbers: a short range keeps labels."""
    from matplotlib import ticker
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(ticker.NullLocator())


def short_metric(m):
    return {"decode_tokens_per_s": "decode tok/s", "prefill_ms": "prefill", "prefill_s": "prefill",
            "ttft_ms": "TTFT", "ttft_s": "TTFT"}.get(m, m)


def render_kv(plt, w, data, source):
    seqs = data["seq_lens"]
    fig, grid, lax = panels(plt, 1, 1, 2.4, 0.4)
    ax = grid[0][0]
    for i, v in enumerate(data["variants"]):
        ax.plot(seqs, [b / GIB for b in v["kv_bytes"]], color=LINE_COLORS[i % len(LINE_COLORS)],
                linestyle=LINESTYLES[i % len(LINESTYLES)], marker="o", markersize=2.5,
                label=f"{v['name']} ({v['kv_heads']} KV heads)")
    cap = data.get("capacity_bytes")
    if cap is not None:
        left = cap - data["weights_bytes"]
        ax.axhline(left / GIB, color="#000000", linewidth=0.8, linestyle="--",
                   label=f"{data.get('gpu') or 'capacity'} minus weights: {left / GIB:.1f} GiB")
    plain_log_y(ax)
    seq_axis(ax, seqs)
    batch = data["batch"]
    ax.set_ylabel("KV cache (GiB, 2^30 bytes)" + (f", batch of {batch}" if batch > 1 else ""))
    ax.set_title(f"KV cache of {data['model']} ({data['heads']} query heads, KV "
                 f"{data['kv_dtype']})", loc="left")
    legend_in(lax, [ax], 2)
    caption = (f"KV-cache bytes against sequence length for {data['model']} with MHA, GQA and MQA "
               f"key/value heads, batch {batch}, in GiB (2^30 bytes)")
    if cap is not None:
        caption += (f"; dashed: capacity {cap} bytes minus weights {data['weights_bytes']} bytes, "
                    f"the most the KV cache can hold")
    w.save(fig, w.name, caption + ". Data from `kvsim kv --plot`.", [source])


def render_latency(plt, w, data, source):
    rows = data["rows"]
    seqs = [r["seq_len"] for r in rows]
    fig, grid, lax = panels(plt, 2, 1, 1.5, 0.3, sharex=True)
    est_c, bound_c = "#0072B2", "#000000"
    for ax, key, scale, unit, title in [
            (grid[0][0], "prefill", 1.0, "s", "prefill"),
            (grid[1][0], "decode_step", 1e3, "ms per token", "decode step")]:
        # Prefill grows about quadratically (log y); a decode step within a small factor (linear,
        # from zero, so the gap to the bound reads true).
        ax.plot(seqs, [r[f"{key}_s"] * scale for r in rows], color=est_c, marker="o",
                markersize=2.5, label="kvsim estimate")
        ax.plot(seqs, [r[f"{key}_lower_bound_s"] * scale for r in rows], color=bound_c,
                linestyle="--", marker="s", markersize=2, label="physical lower bound")
        if key == "prefill":
            plain_log_y(ax)
        else:
            ax.set_ylim(bottom=0)
        ax.set_ylabel(f"{title} ({unit})")
        ax.set_title(title, loc="left", fontsize=6)
        seq_axis(ax, seqs)
    grid[0][0].set_xlabel("")
    fig.suptitle(f"{data['model']} on {data['gpu']}, {data['attention']} attention, batch "
                 f"{data['batch']}, TP {data['tp']}", fontsize=7, x=0.02, ha="left")
    legend_in(lax, [grid[0][0]], 2)
    w.save(fig, w.name, "kvsim's prefill time and decode time per token against the physical "
           "lower bound (the same operations at peak FLOP/s and bandwidth, no overheads), by "
           f"sequence length; profile {data.get('profile', '?')}. Data from `kvsim latency "
           "--plot`.", [source])


VERDICT_STYLE = {"plausible": ("#009E73", "o"), "optimistic": ("#E69F00", "D"),
                 "impossible": ("#D55E00", "X")}


def render_plausibility(plt, w, data, source):
    from matplotlib.transforms import blended_transform_factory
    claims = data["claims"]
    n = max(1, len(claims))
    fig, grid, lax = panels(plt, 1, 1, 0.6 + 0.16 * n, 0.4)
    ax = grid[0][0]

    # Speed relative to kvsim's estimate, so times (lower is faster) and throughputs (higher is
    # faster) share one axis: right of 1 is faster than kvsim expects, right of the bar is
    # faster than the hardware allows.
    def speed(c, v):
        if v <= 0 or c["estimate"] <= 0:
            return float("nan")
        return v / c["estimate"] if c["unit"] == "tokens/s" else c["estimate"] / v

    ys = list(range(len(claims)))[::-1]
    seen = set()
    for y, c in zip(ys, claims):
        b = speed(c, c["lower_bound"])
        ax.plot([b, b], [y - 0.35, y + 0.35], color="#000000", linewidth=1.0,
                label="physical bound" if "bound" not in seen else None)
        seen.add("bound")
        color, marker = VERDICT_STYLE.get(c["verdict"], ("#CC79A7", "o"))
        ax.scatter([speed(c, c["claimed"])], [y], color=color, marker=marker, s=14, zorder=3,
                   linewidths=0, label=f"claim: {c['verdict']}" if c["verdict"] not in seen
                   else None)
        seen.add(c["verdict"])
    ax.axvline(1.0, color="#0072B2", linewidth=0.8, linestyle="--", label="kvsim estimate")
    ax.set_xscale("log")
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{c['label']}, {short_metric(c['metric'])} (line {c['line']})"
                        for c in claims], fontsize=5)
    ax.set_ylim(-0.7, len(claims) - 0.3)
    ax.set_xlabel("speed vs kvsim's estimate (×)")
    ax.set_title(f"Latency claims ({os.path.basename(data.get('file', ''))})", loc="left")
    handles, labels = ax.get_legend_handles_labels()
    # Centred on the figure, not on the narrow plot beside the claim names.
    lax.legend(handles, labels, loc="center", bbox_to_anchor=(0.5, 0.5), ncol=2, frameon=False,
               bbox_transform=blended_transform_factory(fig.transFigure, lax.transAxes))
    w.save(fig, w.name, "Each published claim as a speed relative to kvsim's estimate "
           "(estimate / claimed time, or claimed / estimated tokens/s), with the physical bound "
           "(fastest the GPU's peaks allow) as a bar; a claim right of its bar is impossible. "
           "Data from `kvsim plausibility --plot`.", [source])


class FileWriter(Writer):
    """A Writer for one named figure FILE (its format from the extension)."""

    def __init__(self, plt, out_file, fmt, provenance):
        super().__init__(plt, os.path.dirname(out_file) or ".", fmt, provenance)
        self.name = os.path.splitext(os.path.basename(out_file))[0]


def render_data(kind, data_path, out_file):
    ext = os.path.splitext(out_file)[1].lstrip(".").lower()
    if ext not in ("png", "svg", "pdf"):
        raise InputProblem(f"{out_file}: expected a .png, .svg or .pdf name")
    data = read_json(data_path)
    if data is None:
        raise InputProblem(f"{data_path}: missing")
    if data.get("kind") != kind:
        raise InputProblem(f"{data_path}: holds '{data.get('kind')}' data, not '{kind}'")
    plt = import_matplotlib()
    fixed_style(plt)
    if os.path.dirname(out_file):
        os.makedirs(os.path.dirname(out_file), exist_ok=True)
    prov = {"dir": os.path.dirname(os.path.abspath(data_path)),
            "scenario_hash": f"none (kvsim {kind}: no scenario; inputs in "
                             f"{os.path.basename(data_path)})"}
    w = FileWriter(plt, out_file, ext, prov)
    source = os.path.abspath(data_path)
    {"kv": render_kv, "latency": render_latency,
     "plausibility": render_plausibility}[kind](plt, w, data, source)
    return w.written


# ---- entry ---------------------------------------------------------------------------------

# ---- entry ---------------------------------------------------------------------------------

def kind_of(d):
    if os.path.isdir(os.path.join(d, "points")):
        return "sweep"
    if os.path.isfile(os.path.join(d, "compare.csv")) or os.path.isfile(
            os.path.join(d, "measurements.csv")):
        return "validate"
    if os.path.isfile(os.path.join(d, "summary.json")):
        return "run"
    raise InputProblem(f"{d}: not a kvsim run (summary.json), sweep (points/) or kvsim-validate "
                       f"folder (measurements.csv, compare.csv)")


def provenance(d, kind):
    """The scenario hash(es) the data came from, for every caption."""
    manifest = read_json(os.path.join(d, "manifest.json")) or {}
    h = manifest.get("scenario_hash")
    if kind == "sweep":
        index = read_json(os.path.join(d, "sweep.json")) or {}
        hashes = [p.get("scenario_hash", "?") for p in index.get("points", [])]
        if hashes:
            h = "points " + " ".join(hashes)
    return {"dir": d, "scenario_hash": h or "none (no manifest scenario_hash)",
            "manifest": manifest}


def import_matplotlib():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputProblem("matplotlib is missing: install Debian's python3-matplotlib "
                           "(scripts/setup.sh does) and run with /usr/bin/python3")
    return plt


def render(d, out_dir, fmt="png", long_tokens=4096):
    """Renders every figure DIR supports into out_dir; returns (kind, [paths])."""
    d = os.path.normpath(d)
    if not os.path.isdir(d):
        raise InputProblem(f"{d}: no such folder")
    kind = kind_of(d)
    plt = import_matplotlib()
    fixed_style(plt)
    os.makedirs(out_dir, exist_ok=True)
    w = Writer(plt, out_dir, fmt, provenance(d, kind))
    {"run": lambda: render_run(plt, w, d, long_tokens),
     "sweep": lambda: render_sweep(plt, w, d),
     "validate": lambda: render_validate(plt, w, d)}[kind]()
    return kind, w.written


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?", help="a kvsim run, sweep or kvsim-validate folder")
    ap.add_argument("-o", "--out", help="where the figures go (default DIR/plots); with --kind, "
                    "the figure file")
    ap.add_argument("--format", choices=["png", "svg", "pdf"], default="png")
    ap.add_argument("--long-tokens", type=int, default=4096,
                    help="prompts longer than this are 'long' in the latency CDFs")
    ap.add_argument("--kind", choices=["kv", "latency", "plausibility"],
                    help="draw one figure from --data (JSON written by kvsim KIND --plot)")
    ap.add_argument("--data", help="with --kind: the JSON to draw")
    ap.add_argument("--quiet", action="store_true", help="with --kind: print nothing")
    a = ap.parse_args(argv)
    if a.kind:
        if a.dir or not a.data or not a.out:
            ap.error("--kind needs --data DATA.json and -o FILE, and no DIR")
        try:
            written = render_data(a.kind, a.data, a.out)
        except InputProblem as e:
            print(f"kvsim plot: error: {e}", file=sys.stderr)
            return 2
        if not a.quiet:
            print(f"{a.kind} figure: {written[0]} (data: {a.data})")
        return 0
    if not a.dir:
        ap.error("DIR is required (or --kind with --data)")
    try:
        kind, written = render(a.dir, a.out or os.path.join(a.dir, "plots"), a.format,
                               a.long_tokens)
    except InputProblem as e:
        print(f"kvsim plot: error: {e}", file=sys.stderr)
        return 2
    print(f"{kind} {os.path.normpath(a.dir)}: {len(written)} figures")
    for p in written:
        print(f"  {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
