"""The figure of a `kvsim capacity` folder (capacity.csv): with a search, each configuration's
attainable load against its cost per hour, the Pareto front joined; at a fixed load, each
configuration's cost, coloured by whether it meets the SLO."""
import os

from .inputs import InputProblem, num, read_csv
from .style import legend_in, panels


def label(row, keys):
    return ", ".join(f"{k.split('.')[-1]}={row[k]}" for k in keys) or "scenario"


def render(plt, w, d, opts):
    path = os.path.join(d, "capacity.csv")
    rows = read_csv(path)
    if not rows:
        raise InputProblem(f"{path}: no configuration")
    cols = list(rows[0].keys())
    keys = cols[1:cols.index("priced_gpu")]  # the --over keys
    fig, grid, lax = panels(plt, 1, 1, 2.0, 0.45)
    ax = grid[0][0]
    if "max_load" in cols:
        pts = [(num(r["cost_per_hour_usd"]), num(r["max_load"], 0.0), r) for r in rows]
        for c, l, r in pts:
            on = r["pareto"] == "true"
            ax.plot([c], [l], marker="o" if on else "x", linestyle="none",
                    color="#0072B2" if on else "#999999", markersize=4)
            ax.annotate(label(r, keys), (c, l), fontsize=4.5, xytext=(3, 2),
                        textcoords="offset points")
        front = sorted((c, l) for c, l, r in pts if r["pareto"] == "true")
        if front:
            ax.plot([c for c, _ in front], [l for _, l in front], color="#0072B2", linewidth=1,
                    label="Pareto front")
        ax.plot([], [], marker="x", linestyle="none", color="#999999", label="dominated")
        ax.set_ylabel("largest load meeting the SLO")
        title = "Capacity: attainable load against cost"
        caption = ("Each configuration's largest probed load meeting the SLO (capacity search) "
                   "against its cost per hour (GPUs x price per GPU-hour); the Pareto front "
                   "joins the configurations no other beats on both.")
    else:
        for i, r in enumerate(rows):
            met = r["meets_slo"] == "true"
            ax.barh([len(rows) - 1 - i], [num(r["cost_per_hour_usd"], 0.0)],
                    color="#009E73" if met else "#D55E00", height=0.7,
                    label=("meets the SLO" if met else "misses it") if i in (
                        next((j for j, x in enumerate(rows) if x["meets_slo"] == r["meets_slo"]),
                             -1),) else None)
        ax.set_yticks(list(range(len(rows)))[::-1], [label(r, keys) for r in rows], fontsize=5)
        title = "Cost at the scenario's load"
        caption = ("Cost per hour of each configuration (GPUs x price per GPU-hour), green when "
                   "it meets the SLO at the scenario's load.")
    ax.set_xlabel("cost ($ per hour)")
    legend_in(lax, [ax], 2)
    ax.set_title(title, loc="left")
    w.save(fig, "capacity", caption, [path])
