"""The figures of a kvsim-validate folder: the latency model against held-out measured kernels
(calibration) and the measured kernels under the GPU's roofline (roofline)."""
import os

from .inputs import num, read_csv, read_json
from .style import class_marker, legend_in, line_color, panels


def render(plt, w, d, opts):
    """Every figure validate folder d supports (compare.csv: calibration; measurements.csv:
    roofline)."""
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
            ax.scatter(m, p, s=8, marker=class_marker(i), color=line_color(i),
                       label=f"{c}: MAPE {mape_pct:.1f}%", linewidths=0)
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
        ax.scatter(x, y, s=8, marker=class_marker(i), color=line_color(i), label=c,
                   linewidths=0)
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
