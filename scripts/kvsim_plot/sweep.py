"""The figures of a `kvsim sweep` folder: one per metric (sweep_<metric>), a line per policy over
one swept axis, or a heat map per policy over the first two. An axis is one `grid:` key, or all
the `zip:` keys together (they advance as one; sweep.json's `axes` says which keys form one)."""
import math
import os

from .inputs import InputProblem, num, policies_in_order, read_csv, read_json
from .style import legend_in, line_style, panels

# column, axis label, scale. A column the summary lacks (an older folder) or leaves empty
# (slo_attainment when the scenario has no `slo:`) draws no figure.
SWEEP_METRICS = [
    ("availability", "availability (%)", 100.0),
    ("oom_events", "OOM events", 1.0),
    ("e2e_p99_s", "p99 end-to-end latency (s)", 1.0),
    ("tokens_dropped", "tokens dropped", 1.0),
    ("ttft_p99_s", "p99 time to first token (s)", 1.0),
    ("slo_attainment", "SLO attainment (%)", 100.0),
]


def ordered_values(values):
    """Distinct values in numeric order when all are numbers, else in order of appearance."""
    distinct = list(dict.fromkeys(values))
    if all(not math.isnan(num(v)) for v in distinct):
        return sorted(distinct, key=num)
    return distinct


def sweep_axes(d, keys):
    """The swept axes, each a list of keys that move together: sweep.json's `axes` when it names
    exactly the summary's keys (kvsim sweep writes it), else one axis per key."""
    index = read_json(os.path.join(d, "sweep.json")) or {}
    axes = index.get("axes")
    if (isinstance(axes, list) and all(isinstance(a, list) and a for a in axes)
            and [k for a in axes for k in a] == keys):
        return axes
    return [[k] for k in keys]


def axis_label(axis):
    return ", ".join(axis)


def axis_value(row, axis):
    """A row's position on an axis: the key's value, or the zip keys' values as a tuple."""
    if len(axis) == 1:
        return row[axis[0]]
    return "(" + ", ".join(row[k] for k in axis) + ")"


def constant_scale(grid):
    """(value, vmin, vmax) for a panel whose values are all equal, else None: a symmetric range
    around the value (10% of it, or 1 around zero) instead of matplotlib's degenerate one."""
    np = __import__("numpy")
    finite = grid[~np.isnan(grid)]
    if finite.size == 0 or finite.min() != finite.max():
        return None
    v = float(finite[0])
    half = abs(v) * 0.1 if v != 0 else 1.0
    return v, v - half, v + half


def lines(plt, rows, axis, policies, metric, label, scale):
    fig, grid, lax = panels(plt, 1, 1, 2.0, 0.45)
    ax = grid[0][0]
    xs = ordered_values([axis_value(r, axis) for r in rows])
    numeric = all(not math.isnan(num(x)) for x in xs)
    for i, policy in enumerate(policies):
        by_x = {axis_value(r, axis): num(r[metric]) * scale for r in rows
                if r["policy"] == policy}
        xv = [num(x) if numeric else j for j, x in enumerate(xs) if x in by_x]
        ax.plot(xv, [by_x[x] for x in xs if x in by_x], marker="o", markersize=2.5,
                **line_style(i), label=policy)
    if not numeric:
        if len(axis) > 1 and sum(len(x) for x in xs) > 48:  # long tuples: slant them
            ax.set_xticks(range(len(xs)), xs, rotation=20, ha="right")
        else:
            ax.set_xticks(range(len(xs)), xs)
    ax.set_xlabel(axis_label(axis))
    ax.set_ylabel(label)
    legend_in(lax, [ax], 3)
    if len(axis) > 1:
        return fig, (f"{label} against the zipped keys ({axis_label(axis)}, advancing together), "
                     f"one line per policy.")
    return fig, f"{label} against {axis[0]}, one line per policy."


def heatmaps(plt, rows, axes, policies, metric, label, scale):
    np = __import__("numpy")
    ax_x, ax_y = axes[0], axes[1]
    xs = ordered_values([axis_value(r, ax_x) for r in rows])
    ys = ordered_values([axis_value(r, ax_y) for r in rows])
    rest = [(a, axis_value(rows[0], a)) for a in axes[2:]]
    fig, grid, _ = panels(plt, len(policies), 1, 1.5, 0.01)
    constant = []
    for ax, policy in zip([row[0] for row in grid], policies):
        values = np.full((len(ys), len(xs)), np.nan)
        for r in rows:
            if r["policy"] != policy or any(axis_value(r, a) != v for a, v in rest):
                continue
            values[ys.index(axis_value(r, ax_y)), xs.index(axis_value(r, ax_x))] = \
                num(r[metric]) * scale
        flat = constant_scale(values)
        if flat:  # one colour, mid-scale, with a single tick at the value
            im = ax.imshow(values, origin="lower", aspect="auto", cmap="cividis",
                           interpolation="nearest", vmin=flat[1], vmax=flat[2])
            constant.append(f"{policy} is {flat[0]:.3g} at every point (colour scale "
                            f"{flat[1]:.3g} to {flat[2]:.3g})")
        else:
            im = ax.imshow(values, origin="lower", aspect="auto", cmap="cividis",
                           interpolation="nearest")
        for (yi, xi), v in np.ndenumerate(values):
            if not np.isnan(v):
                ax.text(xi, yi, f"{v:.3g}", ha="center", va="center", fontsize=5,
                        color="white" if v < np.nanmean(values) else "black")
        ax.set_xticks(range(len(xs)), xs)
        ax.set_yticks(range(len(ys)), ys)
        ax.set_xlabel(axis_label(ax_x))
        ax.set_ylabel(axis_label(ax_y))
        ax.set_title(policy, loc="left")
        ax.grid(False)
        bar = fig.colorbar(im, ax=ax, label=label)
        if flat:
            bar.set_ticks([flat[0]])
    fixed = "; ".join(f"{axis_label(a)}={v}" for a, v in rest)
    caption = (f"{label} over {axis_label(ax_x)} and {axis_label(ax_y)}, one panel per policy"
               + (f" (other swept keys fixed at {fixed})" if fixed else "") + "."
               + "".join(f" {c}." for c in constant))
    return fig, caption


def render(plt, w, d, opts):
    """Every figure of sweep folder d (from its summary.csv)."""
    path = os.path.join(d, "summary.csv")
    # A cluster's summary.csv adds a row per replica after each policy's total (replica "all"):
    # the sweep figures draw the totals.
    rows = [r for r in read_csv(path) if r.get("replica", "all") in ("", "all")]
    if not rows or "policy" not in rows[0]:
        raise InputProblem(f"{path}: no rows, or no 'policy' column")
    cols = list(rows[0].keys())
    keys = [c for c in cols[:cols.index("policy")] if c != "point"]
    if not keys:
        raise InputProblem(f"{path}: no swept-key columns before 'policy'")
    axes = sweep_axes(d, keys)
    policies = policies_in_order(rows)
    for metric, label, scale in SWEEP_METRICS:
        # A column with no number in it (slo_attainment of a run without `slo:`) draws nothing.
        if metric not in cols or all(math.isnan(num(r[metric])) for r in rows):
            continue
        if len(axes) == 1:
            fig, caption = lines(plt, rows, axes[0], policies, metric, label, scale)
        else:
            fig, caption = heatmaps(plt, rows, axes, policies, metric, label, scale)
        fig.suptitle(f"Sweep: {label}")
        w.save(fig, f"sweep_{metric}", caption, [path])
