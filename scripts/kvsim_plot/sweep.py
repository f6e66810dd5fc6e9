"""The figures of a `kvsim sweep` folder: one per metric (sweep_<metric>), a line per policy over
one swept key, or a heat map per policy over the first two."""
import math
import os

from .inputs import InputProblem, num, policies_in_order, read_csv
from .style import legend_in, line_style, panels

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


def render(plt, w, d, opts):
    """Every figure of sweep folder d (from its summary.csv)."""
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
                        **line_style(i), label=policy)
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
