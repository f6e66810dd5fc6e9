#!/usr/bin/python3
"""Writes one self-contained HTML page for a kvsim run, sweep or kvsim-validate folder.

    kvsim_report.py DIR [-o FILE] [--kvsim-version V]

The page embeds every figure of kvsim_plot (the package beside it) as a base64 PNG, the summary tables, the scenario
that produced the data (manifest.json's resolved_scenario) and kvsim's version; it loads nothing
from the network and runs no script, so it reads the same offline and in ten years. Like the
figures, it is a pure function of DIR: no dates, same bytes on every render.
"""
import argparse
import base64
import csv
import html
import os
import sys
import tempfile

sys.dont_write_bytecode = True  # leave no __pycache__ in the source tree or install prefix
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kvsim_plot  # noqa: E402  (the sibling package scripts/kvsim_plot/)

STYLE = """
body { font-family: sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; line-height: 1.4; }
table { border-collapse: collapse; font-size: 0.8rem; margin: 0.5rem 0 1.5rem; }
th, td { border: 1px solid #ccc; padding: 0.15rem 0.4rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
figure { margin: 1rem 0 2rem; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85rem; color: #444; white-space: pre-wrap; }
pre { background: #f6f6f6; padding: 0.6rem; overflow-x: auto; font-size: 0.8rem; }
.scroll { overflow-x: auto; }
"""


def table_html(path, max_rows=200):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return "<p>(empty)</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = []
    for r in rows[1:max_rows + 1]:
        body.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>")
    more = (f"<p>{len(rows) - 1 - max_rows} more rows in {html.escape(os.path.basename(path))}"
            f"</p>") if len(rows) - 1 > max_rows else ""
    return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>'
            f'{"".join(body)}</tbody></table></div>{more}')


def pct(v):
    return "" if v is None else f"{100 * v:.1f}%"


def slo_text(slo):
    if not slo:
        return "none"
    bounds = [f"{k} <= {v:g}" for k, v in slo.items() if v is not None]
    return ", ".join(bounds) or "no bound"


def policies_html(summary):
    """Per policy: the KV pool's occupancy and the SLO figures of summary.json (docs/metrics.md).
    A run without `slo:` shows "none" and empty SLO cells."""
    head = ["policy", "availability", "KV pool peak", "KV pool mean", "SLO",
            "SLO attainment", "SLO goodput (req/s)", "SLO goodput (tok/s)"]
    rows = []
    for p in summary.get("policies", []):
        def num(key, fmt):
            v = p.get(key)
            return "" if v is None else fmt.format(v)
        rows.append([p.get("name", "?"), pct(p.get("availability")),
                     pct(p.get("kv_pool_peak_occupancy")), pct(p.get("kv_pool_mean_occupancy")),
                     slo_text(p.get("slo")), pct(p.get("slo_attainment")),
                     num("slo_goodput_requests_per_s", "{:.3f}"),
                     num("slo_goodput_tokens_per_s", "{:.1f}")])
    th = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                   for r in rows)
    return (f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{body}'
            f'</tbody></table></div>')


def replicas_html(policy):
    """A cluster policy's replicas (summary.json `replicas`, docs/cluster.md): one row each."""
    head = ["replica", "gpu", "requests", "completed", "lost in OOM", "failed while down", "OOMs",
            "restarts", "TTFT p99 (s)", "E2E p99 (s)", "peak in use (GiB)", "KV pool peak"]
    rows = []
    for r in policy.get("replicas", []):
        out = r.get("outcomes", {})
        rows.append([r.get("replica", "?"), r.get("gpu", ""), str(r.get("requests_total", "")),
                     str(out.get("completed", "")), str(out.get("lost_oom", "")),
                     str(out.get("failed_unavailable", "")), str(r.get("oom_events", "")),
                     str(r.get("restarts", "")), f'{r.get("ttft_s", {}).get("p99", 0):.3f}',
                     f'{r.get("e2e_s", {}).get("p99", 0):.3f}',
                     f'{r.get("peak_in_use_bytes", 0) / 2**30:.2f}',
                     pct(r.get("kv_pool_peak_occupancy"))])
    return rows_html(head, rows)


def rows_html(head, rows):
    th = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                   for r in rows)
    return (f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{body}'
            f'</tbody></table></div>')


def engine_html(summary):
    """Per policy: the batch and engine metrics (summary.json `batch`) and the mean latency
    breakdown of served requests (`latency_breakdown_mean_s`), docs/metrics.md. A folder written
    before those blocks existed shows nothing."""
    pols = [p for p in summary.get("policies", []) if "batch" in p]
    if not pols:
        return ""
    head = ["policy", "iterations", "batch size p50 / p99 / mean", "batch tokens p50 / p99 / mean",
            "iteration ms p50 / p99 / mean", "busy", "MFU"]
    rows = []
    for p in pols:
        b = p["batch"]
        def dist(key, scale=1.0, fmt="{:.1f}"):
            s = b[key]
            return " / ".join(fmt.format(scale * s[k]) for k in ("p50", "p99", "mean"))
        rows.append([p["name"], str(b["iterations"]), dist("batch_size"),
                     dist("batch_tokens", fmt="{:.0f}"), dist("iteration_s", 1000.0, "{:.2f}"),
                     pct(b["busy_share"]), pct(b["mfu"])])
    out = "<h2>Batches and engine</h2>" + rows_html(head, rows)
    head = ["policy", "served", "guard queue (s)", "engine wait (s)", "prefill (s)", "decode (s)",
            "preempted (s)", "E2E (s)"]
    rows = []
    for p in pols:
        m = p.get("latency_breakdown_mean_s") or {}
        parts = [m.get(k, 0.0) for k in ("guard_queue_s", "engine_wait_s", "prefill_s",
                                         "decode_s", "preempted_s")]
        rows.append([p["name"], str(m.get("count", 0))] + [f"{v:.3f}" for v in parts] +
                    [f"{sum(parts):.3f}"])
    return out + "<h2>Where time goes (mean per served request)</h2>" + rows_html(head, rows)


def figure_html(png_path):
    with open(png_path, "rb") as f:
        data = base64.b64encode(f.read()).decode("ascii")
    caption = ""
    txt = os.path.splitext(png_path)[0] + ".txt"
    if os.path.isfile(txt):
        with open(txt) as f:
            caption = f.read().strip()
    name = os.path.splitext(os.path.basename(png_path))[0]
    return (f'<figure id="fig-{html.escape(name)}"><img alt="{html.escape(name)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{html.escape(caption)}'
            f'</figcaption></figure>')


def build(d, version):
    d = os.path.normpath(d)
    with tempfile.TemporaryDirectory(prefix="kvsim-report-") as tmp:
        kind, figures = kvsim_plot.render(d, tmp, "png")
        figs = [figure_html(p) for p in figures]
    manifest = kvsim_plot.read_json(os.path.join(d, "manifest.json")) or {}
    sweep = kvsim_plot.read_json(os.path.join(d, "sweep.json"))
    # A sweep folder has no manifest of its own: its sweep.json records the version and the hash
    # of the scenario as given (each point's hash is listed below).
    origin = sweep if kind == "sweep" and sweep else manifest
    name = manifest.get("scenario_name") or os.path.basename(os.path.abspath(d))
    parts = [f"<h1>kvsim {html.escape(kind)} report: {html.escape(name)}</h1>",
             "<p>" + " · ".join(html.escape(x) for x in [
                 f"rendered by kvsim {version}",
                 f"data from kvsim {origin.get('kvsim_version', '?')}",
                 f"scenario_hash {origin.get('scenario_hash', 'none')}",
                 f"folder {os.path.basename(os.path.abspath(d))}"]) + "</p>"]
    if manifest.get("scenario_name"):
        parts.append(f"<p>model {html.escape(str(manifest.get('model')))}, gpu "
                     f"{html.escape(str(manifest.get('gpu')))}, seed "
                     f"{html.escape(str(manifest.get('seed')))}</p>")
    summary = kvsim_plot.read_json(os.path.join(d, "summary.json"))
    if kind == "run" and summary:
        parts.append("<h2>KV pool and SLO</h2>" + policies_html(summary))
        for p in summary.get("policies", []):  # cluster runs: a table per policy's replicas
            if p.get("replicas"):
                parts.append(f"<h2>{html.escape(p.get('name', '?'))}: replicas "
                             f"(router {html.escape(str(p.get('router', '?')))})</h2>"
                             + replicas_html(p))
        parts.append(engine_html(summary))
    for table in ("summary.csv", "compare.csv", "capacity.csv"):
        p = os.path.join(d, table)
        if os.path.isfile(p):
            parts.append(f"<h2>{html.escape(table)}</h2>{table_html(p)}")
    parts.append("<h2>Figures</h2>" + "".join(figs))
    scenario = manifest.get("resolved_scenario")
    if scenario:
        parts.append(f"<h2>Scenario (resolved)</h2><pre>{html.escape(scenario)}</pre>")
    if sweep:
        parts.append("<h2>Sweep points</h2><pre>" + html.escape("\n".join(
            f"{p.get('index')}: {p.get('name')} scenario_hash {p.get('scenario_hash')}"
            for p in sweep.get("points", []))) + "</pre>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>kvsim report: {html.escape(name)}</title><style>{STYLE}</style></head>"
            "<body>\n" + "\n".join(parts) + "\n</body></html>\n")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("-o", "--out", help="the HTML file (default DIR/report.html)")
    ap.add_argument("--kvsim-version", default="(script run directly)")
    a = ap.parse_args(argv)
    out = a.out or os.path.join(a.dir, "report.html")
    try:
        page = build(a.dir, a.kvsim_version)
    except kvsim_plot.InputProblem as e:
        print(f"kvsim report: error: {e}", file=sys.stderr)
        return 2
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write(page)
    os.replace(tmp, out)  # atomic: a reader never sees half a page
    print(f"report: {out} ({len(page) // 1024} KiB, self-contained)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
