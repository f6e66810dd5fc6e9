#!/usr/bin/python3
"""Writes one self-contained HTML page for a kvsim run, sweep or kvsim-validate folder.

    kvsim_report.py DIR [-o FILE] [--kvsim-version V]

The page opens with the answer: one verdict line per policy (what happened, in words and
figures), or for a sweep the best point for each metric. Then the summary tables (click a header
to sort), every figure of kvsim_plot (the package beside it) as a base64 PNG, the scenario that
produced the data (manifest.json's resolved_scenario) and kvsim's version. It loads nothing from
the network; its one inline script only sorts tables (without it the page reads the same), so it
reads the same offline and in ten years. Like the figures, it is a pure function of DIR: no
dates, same bytes on every render.
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
table.sortable th { cursor: pointer; }
th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
ul.verdict { font-size: 1.05rem; }
"""

# Click a header of a sortable table to sort its rows by that column (numbers as numbers,
# "12.5%" and "1,234" included; text after numbers), again to reverse. The page's only script.
SORT_SCRIPT = """
document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0], col = th.cellIndex;
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    function key(row) {
      var text = row.cells[col] ? row.cells[col].textContent.trim() : "";
      var n = parseFloat(text.replace(/,/g, ""));
      return isNaN(n) ? text : n;
    }
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a), y = key(b), c;
      if (typeof x === typeof y) c = x < y ? -1 : x > y ? 1 : 0;
      else c = typeof x === "number" ? -1 : 1;
      return ascending ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
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
    return (f'<div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead><tbody>'
            f'{"".join(body)}</tbody></table></div>{more}')


def pct(v):
    return "" if v is None else f"{100 * v:.1f}%"


def slo_text(slo):
    if not slo:
        return "none"
    bounds = [f"{k} <= {v:g}" for k, v in slo.items() if v is not None]
    return ", ".join(bounds) or "no bound"


def seconds_text(v):
    """A latency in words: "14.5 s", "45 ms", "0.52 ms"."""
    if v >= 1:
        return f"{v:.1f} s"
    if v >= 0.01:
        return f"{1000 * v:.0f} ms"
    return f"{1000 * v:.2f} ms"


def plural(n, one, many=None):
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def verdict_lines(summary):
    """One line per policy saying what happened, in words and figures (docs/plots.md):
    "vllm-paged: all 616 served; TTFT p99 14.5 s, 6x guard-reject's",
    "no-guard: 3 OOM crashes, 74 requests lost to OOM, 46.6% available; TTFT p99 2.4 s".
    The TTFT comparison is with the policy whose TTFT p99 is lowest (when another is at least 5%
    higher); the SLO clause only when the policy has an SLO."""
    pols = summary.get("policies", [])
    timed = [p for p in pols if (p.get("ttft_s") or {}).get("count", 0) > 0]
    best = min(timed, key=lambda p: p["ttft_s"]["p99"]) if len(timed) > 1 else None
    lines = []
    for p in pols:
        out = p.get("outcomes", {})
        total = p.get("requests_total", 0)
        served = out.get("completed", 0) + out.get("completed_truncated", 0)
        what = []
        if total == 0:
            what.append("no requests")
        elif served == total:
            what.append(f"all {total:,} served")
        else:
            if p.get("oom_events", 0):
                what.append(plural(p["oom_events"], "OOM crash", "OOM crashes"))
            for key, words in (("lost_oom", "lost to OOM"), ("rejected", "rejected"),
                               ("rejected_too_long", "too long, refused"),
                               ("timed_out", "timed out waiting"),
                               ("failed_unavailable", "failed while the server was down")):
                if out.get(key, 0):
                    what.append(f"{plural(out[key], 'request')} {words}")
            what.append(f"{served:,} of {total:,} served, "
                        f"{100 * p.get('availability', 0):.1f}% available")
        text = f"{p.get('name', '?')}: " + ", ".join(what)
        ttft = p.get("ttft_s") or {}
        if ttft.get("count", 0) > 0:
            text += f"; TTFT p99 {seconds_text(ttft['p99'])}"
            if best is p:
                text += ", the lowest"
            elif best is not None and best["ttft_s"]["p99"] > 0:
                ratio = ttft["p99"] / best["ttft_s"]["p99"]
                if ratio >= 1.05:
                    text += f", {ratio:.2g}x {best.get('name', '?')}'s"
        if p.get("slo") and p.get("slo_attainment") is not None:
            text += f"; SLO met by {100 * p['slo_attainment']:.1f}%"
        lines.append(text)
    return lines


def verdict_html(lines):
    return ('<ul class="verdict">' + "".join(f"<li>{html.escape(t)}</li>" for t in lines) +
            "</ul>")


# Sweep metrics worth a "best point" line: summary.csv column, words, better is higher?, format.
SWEEP_METRICS = [
    ("availability", "highest availability", True, lambda v: f"{100 * v:.1f}%"),
    ("goodput_tokens_per_s", "highest goodput", True, lambda v: f"{v:,.1f} tokens/s"),
    ("ttft_p99_s", "lowest TTFT p99", False, seconds_text),
    ("e2e_p99_s", "lowest E2E p99", False, seconds_text),
    ("slo_attainment", "highest SLO attainment", True, lambda v: f"{100 * v:.1f}%"),
    ("oom_events", "fewest OOM crashes", False, lambda v: f"{v:g}"),
]


def sweep_best_lines(path):
    """For a sweep's summary.csv: per metric, the point (and policy) that does best, with the
    swept keys' values; the first such row in the file on ties. Cluster replica rows are skipped
    (their policy's `all` row counts)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if len(rows) < 2 or "policy" not in rows[0]:
        return []
    head = rows[0]
    ip = head.index("policy")
    keys = head[1:ip]  # between `point` and `policy`: the swept keys
    ir = head.index("replica") if "replica" in head else None
    data = [r for r in rows[1:] if len(r) == len(head) and (ir is None or r[ir] == "all")]
    lines = []
    for col, words, higher, fmt in SWEEP_METRICS:
        if col not in head:
            continue
        i = head.index(col)
        vals = []
        for r in data:
            try:
                vals.append((float(r[i]), r))
            except ValueError:
                continue  # an empty cell: the figure does not apply (no SLO)
        if not vals:
            continue
        best = vals[0]
        for v in vals[1:]:
            if (v[0] > best[0]) if higher else (v[0] < best[0]):
                best = v
        v, r = best
        where = ", ".join(f"{k}={r[1 + j]}" for j, k in enumerate(keys))
        lines.append(f"{words}: {fmt(v)} at point {r[0]} ({where}), policy {r[ip]}")
    return lines


def policies_html(summary):
    """Per policy: the KV pool's occupancy and the SLO figures of summary.json (docs/metrics.md).
    The SLO columns only when some policy has an SLO."""
    pols = summary.get("policies", [])
    slo = any(p.get("slo") for p in pols)
    head = ["policy", "availability", "KV pool peak", "KV pool mean"]
    if slo:
        head += ["SLO", "SLO attainment", "SLO goodput (req/s)", "SLO goodput (tok/s)"]
    rows = []
    for p in pols:
        def num(key, fmt):
            v = p.get(key)
            return "" if v is None else fmt.format(v)
        row = [p.get("name", "?"), pct(p.get("availability")),
               pct(p.get("kv_pool_peak_occupancy")), pct(p.get("kv_pool_mean_occupancy"))]
        if slo:
            row += [slo_text(p.get("slo")), pct(p.get("slo_attainment")),
                    num("slo_goodput_requests_per_s", "{:.3f}"),
                    num("slo_goodput_tokens_per_s", "{:.1f}")]
        rows.append(row)
    return rows_html(head, rows)


def replicas_html(policy):
    """A cluster policy's replicas (summary.json `replicas`, docs/cluster.md): one row each."""
    head = ["replica", "gpu", "requests", "completed", "lost in OOM", "failed while down", "OOMs",
            "restarts", "TTFT p99 (s)", "E2E p99 (s)", "peak in use (GiB)", "KV pool peak",
            "iterations", "busy", "MFU"]
    rows = []
    for r in policy.get("replicas", []):
        out = r.get("outcomes", {})
        b = r.get("batch") or {}
        rows.append([r.get("replica", "?"), r.get("gpu", ""), str(r.get("requests_total", "")),
                     str(out.get("completed", "")), str(out.get("lost_oom", "")),
                     str(out.get("failed_unavailable", "")), str(r.get("oom_events", "")),
                     str(r.get("restarts", "")), f'{r.get("ttft_s", {}).get("p99", 0):.3f}',
                     f'{r.get("e2e_s", {}).get("p99", 0):.3f}',
                     f'{r.get("peak_in_use_bytes", 0) / 2**30:.2f}',
                     pct(r.get("kv_pool_peak_occupancy")), str(b.get("iterations", "")),
                     pct(b.get("busy_share")), pct(b.get("mfu"))])
    return rows_html(head, rows)


def rows_html(head, rows):
    """An HTML table: `head` the column names, `rows` lists of cell strings (escaped here)."""
    th = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                   for r in rows)
    return (f'<div class="scroll"><table class="sortable"><thead><tr>{th}</tr></thead>'
            f'<tbody>{body}</tbody></table></div>')


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
        parts.append("<h2>Verdict</h2>" + verdict_html(verdict_lines(summary)))
    if kind == "sweep" and os.path.isfile(os.path.join(d, "summary.csv")):
        best = sweep_best_lines(os.path.join(d, "summary.csv"))
        if best:
            parts.append("<h2>Best points</h2>" + verdict_html(best))
    if kind == "run" and summary:
        slo = any(p.get("slo") for p in summary.get("policies", []))
        parts.append(f"<h2>{'KV pool and SLO' if slo else 'KV pool'}</h2>" + policies_html(summary))
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
            "<body>\n" + "\n".join(parts) + f"\n<script>{SORT_SCRIPT}</script>\n</body></html>\n")


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
