"""The one-figure calculators, each drawn from the JSON that `kvsim kv|latency|plausibility
--plot FIG` writes beside FIG: KV bytes against sequence length for MHA/GQA/MQA, the latency
estimate against the physical bound, and published claims against both."""
import os

from .style import GIB, legend_in, line_style, panels

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
        ax.plot(seqs, [b / GIB for b in v["kv_bytes"]], **line_style(i), marker="o", markersize=2.5,
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
    if isinstance(data["batch"], list):  # `--batch 1,8`: a line per batch size
        return render_latency_batches(plt, w, data, source)
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


def render_latency_batches(plt, w, data, source):
    """The latency figure for several batch sizes: per panel, a solid line per batch size (the
    estimate) and a dotted one of the same colour (its physical lower bound)."""
    rows, batches = data["rows"], data["batch"]
    seqs = list(dict.fromkeys(r["seq_len"] for r in rows))
    fig, grid, lax = panels(plt, 2, 1, 1.5, 0.3, sharex=True)
    for ax, key, scale, unit, title in [
            (grid[0][0], "prefill", 1.0, "s", "prefill"),
            (grid[1][0], "decode_step", 1e3, "ms per token", "decode step")]:
        for i, b in enumerate(batches):
            mine = [r for r in rows if r["batch"] == b]
            xs = [r["seq_len"] for r in mine]
            style = line_style(i)
            ax.plot(xs, [r[f"{key}_s"] * scale for r in mine], color=style["color"],
                    marker="o", markersize=2.5, label=f"batch {b}")
            ax.plot(xs, [r[f"{key}_lower_bound_s"] * scale for r in mine], color=style["color"],
                    linestyle=":", linewidth=0.8)
        if key == "prefill":
            plain_log_y(ax)
        else:
            ax.set_ylim(bottom=0)
        ax.set_ylabel(f"{title} ({unit})")
        ax.set_title(title, loc="left", fontsize=6)
        seq_axis(ax, seqs)
    grid[0][0].set_xlabel("")
    batch_text = ", ".join(str(b) for b in batches)
    fig.suptitle(f"{data['model']} on {data['gpu']}, {data['attention']} attention, batch "
                 f"{batch_text}, TP {data['tp']}", fontsize=7, x=0.02, ha="left")
    legend_in(lax, [grid[0][0]], min(len(batches), 4))
    w.save(fig, w.name, "kvsim's prefill time and decode time per token (solid, one colour per "
           f"batch size: {batch_text}) against the physical lower bound (dotted, same colour: the "
           "same operations at peak FLOP/s and bandwidth, no overheads), by sequence length; "
           f"profile {data.get('profile', '?')}. Data from `kvsim latency --plot`.", [source])


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
