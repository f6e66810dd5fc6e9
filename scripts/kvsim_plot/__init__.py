"""Renders the figures of a kvsim result folder: a run, a sweep or a kvsim-validate folder.

    /usr/bin/python3 scripts/kvsim_plot DIR [-o PLOTDIR] [--format png|svg|pdf] [--long-tokens N]
    /usr/bin/python3 scripts/kvsim_plot --kind kv|latency|plausibility --data DATA.json -o FIG

The second form draws one figure from the JSON that `kvsim kv|latency|plausibility --plot FIG`
writes beside FIG (FIG's name with .json): KV bytes against sequence length for MHA/GQA/MQA,
latency estimate against the physical bound, or published claims against both.

Every figure is a pure function of the files in DIR: the style is fixed (style.py, not the
user's matplotlibrc), and the PNG/SVG/PDF metadata that would carry a date or a random id is
pinned (writer.py), so rendering twice gives identical bytes. Each figure FIG.<ext> gets FIG.txt
beside it: its caption, the files it came from and the scenario hash in DIR's manifest.

The package: style.py (colours, sizes, panels), inputs.py (reading files), writer.py (saving),
one module per figure family (run.py, sweep.py, validate.py, calculators.py), kinds.py (the one
table of kinds), cli.py (the entry point; __main__.py runs it). `kvsim plot` and the calculators'
--plot run this folder with Python; edit freely, no rebuild. Needs Debian's python3-matplotlib
(scripts/setup.sh installs it). Exit codes: 0 ok, 2 bad input or missing matplotlib.
"""
from .cli import main, render, render_data
from .inputs import InputProblem, read_json

__all__ = ["InputProblem", "main", "read_json", "render", "render_data"]
