"""The one table of what kvsim_plot draws. A "folder" kind renders every figure of a result
folder and is recognised by the files in it (tried in the table's order); a "data" kind draws one
figure from the JSON that `kvsim KIND --plot FIG` writes beside FIG. A new figure family is one
module and one row here."""
import collections
import os

from . import calculators, capacity, e2e, run, sweep, validate, vllm_run
from .inputs import InputProblem

# name: what the argument names; source: "folder" or "data"; detect(d): whether folder d is of
# this kind (folder kinds only); render: (plt, writer, folder, opts) for folders, (plt, writer,
# data, source path) for data.
Kind = collections.namedtuple("Kind", "name source detect render")


def _has(*names, test=os.path.isfile):
    return lambda d: any(test(os.path.join(d, n)) for n in names)


KINDS = [
    # Before e2e and run: a vllm-run folder holds kvsim's run files, e2e.json and the measured
    # server's requests.
    Kind("vllm_run", "folder", _has("measured_requests.csv"), vllm_run.render),
    # Before run: an e2e folder holds modeled/ and measured/ run folders, and e2e.json.
    Kind("e2e", "folder", _has("e2e.json"), e2e.render),
    # Before sweep: a fixed-load capacity grid also holds points/.
    Kind("capacity", "folder", _has("capacity.csv"), capacity.render),
    Kind("sweep", "folder", _has("points", test=os.path.isdir), sweep.render),
    Kind("validate", "folder", _has("compare.csv", "measurements.csv"), validate.render),
    Kind("run", "folder", _has("summary.json"), run.render),
    Kind("kv", "data", None, calculators.render_kv),
    Kind("latency", "data", None, calculators.render_latency),
    Kind("plausibility", "data", None, calculators.render_plausibility),
]


def data_kinds():
    """The names --kind accepts."""
    return [k.name for k in KINDS if k.source == "data"]


def data_kind(name):
    return next(k for k in KINDS if k.source == "data" and k.name == name)


def folder_kind(d):
    """The kind of result folder d, or InputProblem."""
    for k in KINDS:
        if k.source == "folder" and k.detect(d):
            return k
    raise InputProblem(f"{d}: not a kvsim run (summary.json), sweep (points/) or kvsim-validate "
                       f"folder (measurements.csv, compare.csv), capacity search (capacity.csv) or "
                       f"kvsim-validate e2e folder (e2e.json)")
