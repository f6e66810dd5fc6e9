"""The figure of a `kvsim-validate vllm-run` folder (measured_requests.csv beside kvsim's run
files): the TTFT, TPOT and E2E CDFs of the measured server and of kvsim side by side (measured
solid, kvsim dashed), and the running and waiting requests over time (the server's
timeseries.csv, when the run has one, against kvsim's timeseries.csv)."""
import math
import os

from .e2e import ecdf, log_axis
from .inputs import num, read_csv, read_json
from .style import legend_in, line_color, panels, COLUMN_IN


def _values(rows, key, scale=1e3):
    out = []
    for r in rows:
        v = num(r.get(key, ""))
        if not math.isnan(v) and v > 0:
            out.append(v * scale)
    return out


def _summed(rows, tkey):
    """Running and waiting summed over replicas at each sample time (a data-parallel run writes
    one row per replica and time)."""
    out = {}
    for r in rows:
        t = num(r[tkey])
        cur = out.setdefault(t, {tkey: t, "running": 0.0, "waiting": 0.0})
        cur["running"] += num(r["running"], 0)
        cur["waiting"] += num(r["waiting"], 0)
    return [out[t] for t in sorted(out)]


def render(plt, w, d, opts):
    mea_path = os.path.join(d, "measured_requests.csv")
    sim_path = os.path.join(d, "requests.csv")
    ts_sim_path = os.path.join(d, "timeseries.csv")
    ts_mea_path = os.path.join(d, "measured_timeseries.csv")
    measured = read_csv(mea_path)
    simulated = [r for r in read_csv(sim_path) if r.get("outcome") == "completed"]
    summary = read_json(os.path.join(d, "e2e.json")) or {}
    errors = {m["metric"]: m["error_pct"] for m in summary.get("metrics", [])}

    fig, grid, lax = panels(plt, 1, 4, 1.9, 0.45, width=2 * COLUMN_IN)
    for col, (key, name) in enumerate([("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E")]):
        ax = grid[0][col]
        for rows, side, style in ((measured, "measured", "-"), (simulated, "kvsim", "--")):
            vals = _values(rows, key)
            if vals:
                x, y = ecdf(vals)
                ax.step(x, y, where="post", color=line_color(0 if side == "measured" else 1),
                        linestyle=style, label=side if col == 0 else None)
        err = errors.get(key.replace("_s", "_mean_s"))
        ax.set_title(f"{name}" + (f": mean {err:+.1f}%" if err is not None else ""), loc="left")
        ax.set_xlabel(f"{name} (ms)")
        ax.set_ylim(0, 1.02)
        if key == "ttft_s":
            log_axis(ax, "x")
    grid[0][0].set_ylabel("fraction of requests")

    ax = grid[0][3]
    for rows, side, style, tkey in ((read_csv(ts_mea_path) if os.path.isfile(ts_mea_path) else [],
                                     "server", "-", "t"),
                                    (read_csv(ts_sim_path), "kvsim", "--", "t_s")):
        if not rows:
            continue
        rows = _summed(rows, tkey)
        t = [r[tkey] for r in rows]
        for i, what in enumerate(("running", "waiting")):
            ax.plot(t, [r[what] for r in rows], color=line_color(2 + i), linestyle=style,
                    label=f"{what} ({side})")
    ax.set_title("Requests over time", loc="left")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("requests")
    legend_in(lax, [a for r in grid for a in r], 4)
    w.save(fig, "e2e", "kvsim against a measured vLLM run (kvsim-validate vllm-run): TTFT, TPOT "
           "and E2E CDFs of the server's requests (solid) and kvsim's replay of them (dashed), "
           "titles with the error of the mean; right: running and waiting requests over time, "
           "the server's one-second samples (solid) against kvsim's (dashed).",
           [p for p in (mea_path, sim_path, ts_sim_path, ts_mea_path) if os.path.isfile(p)])
