"""The entry point: argument parsing, the two forms (a result folder, or one --kind figure from
its JSON), the provenance every caption carries, and the one-line errors (exit 2)."""
import argparse
import os
import sys
import types

from .inputs import InputProblem, import_matplotlib, read_json
from .kinds import data_kind, data_kinds, folder_kind
from .style import fixed_style
from .writer import FileWriter, Writer

DESCRIPTION = ("Renders the figures of a kvsim result folder: a run, a sweep or a kvsim-validate "
               "folder.")


def provenance(d, kind):
    """The scenario hash(es) the data came from, for every caption."""
    manifest = read_json(os.path.join(d, "manifest.json")) or {}
    h = manifest.get("scenario_hash")
    if kind == "sweep":
        index = read_json(os.path.join(d, "sweep.json")) or {}
        hashes = [p.get("scenario_hash", "?") for p in index.get("points", [])]
        if hashes:
            h = "points " + " ".join(hashes)
    return {"dir": d, "scenario_hash": h or "none (no manifest scenario_hash)",
            "manifest": manifest}


def render(d, out_dir, fmt="png", long_tokens=4096):
    """Renders every figure DIR supports into out_dir; returns (kind, [paths])."""
    d = os.path.normpath(d)
    if not os.path.isdir(d):
        raise InputProblem(f"{d}: no such folder")
    kind = folder_kind(d)
    plt = import_matplotlib()
    fixed_style(plt)
    os.makedirs(out_dir, exist_ok=True)
    w = Writer(plt, out_dir, fmt, provenance(d, kind.name))
    kind.render(plt, w, d, types.SimpleNamespace(long_tokens=long_tokens))
    return kind.name, w.written


def render_data(kind, data_path, out_file):
    """Draws out_file (its format from the extension) from the --plot JSON data_path."""
    ext = os.path.splitext(out_file)[1].lstrip(".").lower()
    if ext not in ("png", "svg", "pdf"):
        raise InputProblem(f"{out_file}: expected a .png, .svg or .pdf name")
    data = read_json(data_path)
    if data is None:
        raise InputProblem(f"{data_path}: missing")
    if data.get("kind") != kind:
        raise InputProblem(f"{data_path}: holds '{data.get('kind')}' data, not '{kind}'")
    plt = import_matplotlib()
    fixed_style(plt)
    if os.path.dirname(out_file):
        os.makedirs(os.path.dirname(out_file), exist_ok=True)
    prov = {"dir": os.path.dirname(os.path.abspath(data_path)),
            "scenario_hash": f"none (kvsim {kind}: no scenario; inputs in "
                             f"{os.path.basename(data_path)})"}
    w = FileWriter(plt, out_file, ext, prov)
    source = os.path.abspath(data_path)
    data_kind(kind).render(plt, w, data, source)
    return w.written


def main(argv):
    ap = argparse.ArgumentParser(description=DESCRIPTION)
    ap.add_argument("dir", nargs="?", help="a kvsim run, sweep or kvsim-validate folder")
    ap.add_argument("-o", "--out", help="where the figures go (default DIR/plots); with --kind, "
                    "the figure file")
    ap.add_argument("--format", choices=["png", "svg", "pdf"], default="png")
    ap.add_argument("--long-tokens", type=int, default=4096,
                    help="prompts longer than this are 'long' in the latency CDFs")
    ap.add_argument("--kind", choices=data_kinds(),
                    help="draw one figure from --data (JSON written by kvsim KIND --plot)")
    ap.add_argument("--data", help="with --kind: the JSON to draw")
    ap.add_argument("--quiet", action="store_true", help="with --kind: print nothing")
    a = ap.parse_args(argv)
    if a.kind:
        if a.dir or not a.data or not a.out:
            ap.error("--kind needs --data DATA.json and -o FILE, and no DIR")
        try:
            written = render_data(a.kind, a.data, a.out)
        except InputProblem as e:
            print(f"kvsim plot: error: {e}", file=sys.stderr)
            return 2
        if not a.quiet:
            print(f"{a.kind} figure: {written[0]} (data: {a.data})")
        return 0
    if not a.dir:
        ap.error("DIR is required (or --kind with --data)")
    try:
        kind, written = render(a.dir, a.out or os.path.join(a.dir, "plots"), a.format,
                               a.long_tokens)
    except InputProblem as e:
        print(f"kvsim plot: error: {e}", file=sys.stderr)
        return 2
    print(f"{kind} {os.path.normpath(a.dir)}: {len(written)} figures")
    for p in written:
        print(f"  {p}")
    return 0
