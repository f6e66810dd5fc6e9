"""The fixed look of every figure: colours, sizes, the matplotlib settings, and the panel grid
with its legend row. Change a value here and every figure follows."""

GIB = float(1 << 30)

# Okabe & Ito (2008), safe for the common colour-vision deficiencies.
OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7",
             "#000000"]
# Lines skip the yellow, which vanishes on white.
LINE_COLORS = ["#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#000000"]
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1))]
# Scatter markers, one per kernel class.
CLASS_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]

COLUMN_IN = 3.5  # one column of a two-column paper
DPI = 200


def line_color(i):
    """The i-th series' colour (cycling)."""
    return LINE_COLORS[i % len(LINE_COLORS)]


def line_style(i):
    """The i-th line series' colour and dash pattern, as plot() keywords."""
    return {"color": line_color(i), "linestyle": LINESTYLES[i % len(LINESTYLES)]}


def class_marker(i):
    """The i-th scatter series' marker."""
    return CLASS_MARKERS[i % len(CLASS_MARKERS)]


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

