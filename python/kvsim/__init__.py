"""kvsim from Python: run scenarios and sweeps, and read their results as pandas DataFrames.

    import kvsim
    r = kvsim.run("scenarios/seed-a-guard.yaml", seed=7, set={"workload.rate": 4})
    r.summary["policies"][0]["availability"]
    r.requests.groupby("policy").e2e_s.describe()
    r.write("out/seed-a")            # the files `kvsim run -o out/seed-a` writes, byte for byte

Every function calls the C++ library the `kvsim` command line uses (the extension _kvsim), so
results, files and error messages are the CLI's. Bad input raises kvsim.ConfigError (a subclass
of kvsim.InputError) whose message is the CLI's one line, `file:line:col: ...`. docs/python.md
documents the module.
"""

import csv
import io
import json
import numbers
import os
import subprocess
import sys
import tempfile

from . import _kvsim
from ._kvsim import ConfigError, InputError, InvariantError

try:  # DataFrames when pandas is importable, lists of dicts otherwise
    import pandas as _pd
except ImportError:  # pragma: no cover - exercised only without pandas
    _pd = None

__all__ = ["run", "sweep", "kv", "latency", "models", "gpus", "Result", "SweepResult",
           "ConfigError", "InputError", "InvariantError", "__version__"]
__version__ = _kvsim.version()

# The files of a run folder, in the order the manifest lists them (manifest.json last).
RUN_FILES = ("summary.json", "summary.csv", "requests.csv", "timeseries.csv", "manifest.json")


def _scenario_args(scenario):
    """(text or path, source name for messages, is_path) of a path, YAML text or dict."""
    if isinstance(scenario, dict):
        # JSON is YAML: the dict reaches the same loader, and errors point into this text.
        return json.dumps(scenario, indent=2), "<dict>", False
    if isinstance(scenario, os.PathLike):
        return os.fspath(scenario), "", True
    if not isinstance(scenario, str):
        raise TypeError("scenario: expected a path, YAML text or a dict, not %s"
                        % type(scenario).__name__)
    one_line = "\n" not in scenario
    if one_line and (os.path.exists(scenario) or scenario.endswith((".yaml", ".yml"))):
        return scenario, "", True
    return scenario, "<string>", False


def _set_args(values):
    """--set assignments from a dict {path: value} or a list of 'path=value' strings."""
    if values is None:
        return []
    if isinstance(values, dict):
        out = []
        for key, value in values.items():
            text = value if isinstance(value, str) else json.dumps(value)  # JSON is YAML
            out.append("%s=%s" % (key, text))
        return out
    return [str(v) for v in values]


_INT64_MIN, _INT64_MAX = -2**63, 2**63 - 1


def _integer(name, value):
    """`value` as an int, or TypeError naming the argument: no bools, no floats (seed=1.5 used to
    run seed 1), no strings. Ranges are the library's to check (sim/run/arguments.h)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s: expected an integer, got %r (%s)" % (name, value, type(value).__name__))
    # Python's integers have no bound; the library's are 64-bit (pybind11 would refuse 10**30
    # with its signature dump, naming no argument).
    if not _INT64_MIN <= int(value) <= _INT64_MAX:
        raise ValueError("%s: expected an integer from %d to %d, got %d"
                         % (name, _INT64_MIN, _INT64_MAX, int(value)))
    return int(value)


def _number(name, value):
    """`value` as a float, or TypeError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s: expected a number, got %r (%s)" % (name, value, type(value).__name__))
    return float(value)


def _text(name, value):
    """`value` as a str, or TypeError naming the argument (not pybind11's signature dump)."""
    if not isinstance(value, str):
        raise TypeError("%s: expected a string, got %r (%s)" % (name, value, type(value).__name__))
    return value


def _integers(name, values):
    """One integer or a list of them, each checked, as a list."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (numbers.Integral, list, tuple, range)):
        raise TypeError("%s: expected an integer or a list of integers, got %r (%s)"
                        % (name, values, type(values).__name__))
    if isinstance(values, numbers.Integral):
        return [_integer(name, values)]
    return [_integer("%s[%d]" % (name, i), v) for i, v in enumerate(values)]


def _cell(text):
    if text == "":
        return None
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def _table(data):
    """CSV bytes as a DataFrame, or (without pandas) a list of dicts with numbers converted."""
    if _pd is not None:
        return _pd.read_csv(io.BytesIO(data))
    return [{k: _cell(v) for k, v in row.items()}
            for row in csv.DictReader(io.StringIO(data.decode()))]


def _records(rows):
    return _pd.DataFrame(rows) if _pd is not None else rows


def _plot_script():
    return os.path.join(_kvsim.data_dir(), "scripts", "kvsim_plot")


class Result:
    """One run: what `kvsim run -o DIR` writes, held in memory.

    summary     the dict summary.json holds
    manifest    the dict manifest.json holds
    requests    requests.csv (a DataFrame, or a list of dicts without pandas)
    timeseries  timeseries.csv (likewise)
    files       {name: bytes} of the five files
    """

    def __init__(self, files):
        self.files = files
        self.summary = json.loads(files["summary.json"])
        self.manifest = json.loads(files["manifest.json"])
        self._requests = None
        self._timeseries = None

    @property
    def requests(self):
        if self._requests is None:
            self._requests = _table(self.files["requests.csv"])
        return self._requests

    @property
    def timeseries(self):
        if self._timeseries is None:
            self._timeseries = _table(self.files["timeseries.csv"])
        return self._timeseries

    @property
    def policies(self):
        """The policies' summaries by name."""
        return {p["name"]: p for p in self.summary["policies"]}

    def write(self, directory):
        """Writes the run's files to `directory` (the CLI's bytes); returns its path."""
        os.makedirs(directory, exist_ok=True)
        for name in RUN_FILES:  # manifest.json last: it marks a complete folder, as in the CLI
            path = os.path.join(directory, name)
            tmp = "%s.tmp.%d" % (path, os.getpid())
            with open(tmp, "wb") as f:
                f.write(self.files[name])
            os.replace(tmp, path)
        return directory

    def plot(self, directory=None, *, python=None):
        """Renders the figures of `kvsim run --plot` (scripts/kvsim_plot) into DIRECTORY/plots/.

        Without a directory the run is written to a new temporary one. Returns the figures'
        paths, sorted."""
        if directory is None:
            directory = tempfile.mkdtemp(prefix="kvsim-plot-")
        self.write(directory)
        subprocess.run([python or _python(), _plot_script(), directory], check=True)
        plots = os.path.join(directory, "plots")
        return sorted(os.path.join(plots, f) for f in os.listdir(plots))

    def __repr__(self):
        names = ", ".join(p["name"] for p in self.summary["policies"])
        return "<kvsim.Result %s: policies %s>" % (self.manifest["scenario_name"], names)


def _python():
    # The interpreter that runs this module is the one that has matplotlib when it imports kvsim.
    return os.environ.get("KVSIM_PYTHON") or sys.executable or "/usr/bin/python3"


def run(scenario, *, seed=None, set=None, policies=None, timeline=None, timeline_window=None,
        sample_interval=1.0, check_invariants=False):
    """Runs a scenario (a path, YAML text or a dict) like `kvsim run`; returns a Result.

    seed        overrides the scenario's seed (as --set seed=N)
    set         {path: value} or ["path=value", ...]: --set, applied in order
    policies    names of the policies to run (default: all, in the scenario's order)
    timeline    also write a Chrome trace (Perfetto) to this path; timeline_window=(start, end)
                in simulated seconds bounds it (`kvsim run --timeline/--timeline-window`)
    """
    text, source, is_path = _scenario_args(scenario)
    sets = _set_args(set)
    if seed is not None:
        sets.append("seed=%d" % _integer("seed", seed))
    start, end = 0.0, None
    if timeline_window is not None:
        if isinstance(timeline_window, (str, bytes)) or not hasattr(timeline_window, "__len__") \
                or len(timeline_window) != 2:
            raise TypeError("timeline_window: expected (start, end) in simulated seconds, got %r"
                            % (timeline_window,))
        start = _number("timeline_window[0]", timeline_window[0])
        if timeline_window[1] is not None:
            end = _number("timeline_window[1]", timeline_window[1])
    if policies is not None and (isinstance(policies, str) or
                                 not all(isinstance(p, str) for p in policies)):
        raise TypeError("policies: expected a list of policy names, got %r" % (policies,))
    with tempfile.TemporaryDirectory(prefix="kvsim-run-") as tmp:
        _kvsim.run(text, source, is_path, sets, list(policies) if policies is not None else None,
                   tmp, timeline=os.fspath(timeline) if timeline else "",
                   timeline_start_s=start, timeline_end_s=end,
                   sample_interval_s=_number("sample_interval", sample_interval),
                   check_invariants=bool(check_invariants))
        files = {}
        for name in RUN_FILES:
            with open(os.path.join(tmp, name), "rb") as f:
                files[name] = f.read()
    return Result(files)


class SweepResult:
    """A sweep's folder: summary (summary.csv: a row per point and policy; with a cluster, also a row per replica) and points/."""

    def __init__(self, directory, keep=None):
        self.dir = directory
        self._keep = keep  # a TemporaryDirectory to remove with this object
        with open(os.path.join(directory, "summary.csv"), "rb") as f:
            self.summary_csv = f.read()
        self.summary = _table(self.summary_csv)

    def point(self, name):
        """One point's run (a folder under points/) as a Result."""
        files = {}
        for file in RUN_FILES:
            with open(os.path.join(self.dir, "points", name, file), "rb") as f:
                files[file] = f.read()
        return Result(files)

    def __repr__(self):
        return "<kvsim.SweepResult %s: %d rows>" % (self.dir, len(self.summary))


def sweep(scenario, *, out=None, jobs=None, set=None):
    """Runs every point of the scenario's `sweep:` block, like `kvsim sweep -o OUT -j JOBS`.

    Points run on `jobs` threads (default: the cores) with the GIL released; an existing OUT
    resumes. Without `out` the folder is temporary (removed with the result)."""
    text, source, is_path = _scenario_args(scenario)
    keep = None
    if out is None:
        keep = tempfile.TemporaryDirectory(prefix="kvsim-sweep-")
        out = keep.name
    jobs = (os.cpu_count() or 1) if jobs is None else _integer("jobs", jobs)
    _kvsim.sweep(text, source, is_path, _set_args(set), os.fspath(out), jobs)
    return SweepResult(os.fspath(out), keep)


def kv(model="seed-7b-mha", seq=(2048, 4096, 8192, 16384, 32768), *, batch=1, gpu=None,
       capacity_gb=None, weights_gb=None):
    """KV-cache bytes per request and per batch, and what is left: `kvsim kv --json`'s rows."""
    return _records(json.loads(_kvsim.kv_json(
        _text("model", model), _integers("seq", seq), _integer("batch", batch),
        None if gpu is None else _text("gpu", gpu),
        None if capacity_gb is None else _number("capacity_gb", capacity_gb),
        None if weights_gb is None else _number("weights_gb", weights_gb))))


def latency(model="seed-7b-mha", gpu="a100-sxm4-80gb", seq=(4096, 16384, 32768), *, batch=1,
            attention="flash", block_size=0, tp=1, pp=1, verbose=False):
    """Prefill, TTFT and decode time with their bounds: `kvsim latency --json`'s rows."""
    return _records(json.loads(_kvsim.latency_json(
        _text("model", model), _text("gpu", gpu), _integers("seq", seq),
        _integers("batch", batch), _text("attention", attention),
        _integer("block_size", block_size), _integer("tp", tp), _integer("pp", pp), bool(verbose))))


def models():
    """The model catalog: `kvsim models --json`."""
    return _records(json.loads(_kvsim.models_json()))


def gpus():
    """The GPU catalog: `kvsim gpus --json`."""
    return _records(json.loads(_kvsim.gpus_json()))
