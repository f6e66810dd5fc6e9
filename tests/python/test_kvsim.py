"""The Python module against the CLI: the same files byte for byte, the same
summaries and catalog rows, errors with the CLI's file:line:col message, DataFrame columns and
dtypes, and sweeps on threads. Run by ctest (tests/python/CMakeLists.txt) with PYTHONPATH set to
build/python and KVSIM_BIN to the built CLI."""

import json
import os
import subprocess
import threading

import pytest

import kvsim

KVSIM = os.environ.get("KVSIM_BIN", "kvsim")
SOURCE = os.environ.get("KVSIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))

# Small enough to run in well under a second: 40 requests of a 4/s Poisson stream against a
# 24 GB GPU, unguarded (it crashes) and behind the reserve guard (it queues).
SMALL = """\
name: small
description: "pytest: 40 requests, two policies"
seed: 5
model: seed-7b-mha
gpu: {name: small, memory_gb: 24, hbm_gb_per_s: 2000, fp16_tflops: 312}
engine:
  kv: {type: caching_allocator, growth: preallocate}
  on_oom: crash
  restart_s: 5
  max_model_len: 8192
workload:
  arrivals: {type: poisson, rate: 4}
  max_requests: 40
  prompt_tokens: {type: uniform, min: 512, max: 6000}
  output_tokens: {type: fixed, value: 64}
policies:
  - name: none
    guards: []
  - name: reserve
    guards: [{type: reserve}]
"""

SWEEP = SMALL + """\
sweep:
  grid:
    workload.arrivals.rate: [2, 4, 8]
"""

FILES = ["summary.json", "summary.csv", "requests.csv", "timeseries.csv", "manifest.json"]


def cli(*args, check=True):
    p = subprocess.run([KVSIM, *args], capture_output=True, text=True)
    if check:
        assert p.returncode == 0, p.stderr
    return p


@pytest.fixture
def scenario(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text(SMALL)
    return str(path)


def read(folder, name):
    with open(os.path.join(folder, name), "rb") as f:
        return f.read()


def test_run_writes_the_clis_files_byte_for_byte(scenario, tmp_path):
    cli("run", scenario, "-o", str(tmp_path / "cli"))
    r = kvsim.run(scenario)
    r.write(str(tmp_path / "py"))
    for name in FILES:
        assert read(tmp_path / "py", name) == read(tmp_path / "cli", name), name
    assert r.summary == json.loads(read(tmp_path / "cli", "summary.json"))
    # 40 requests per policy; the unguarded one crashes (OOM) at least once.
    assert [p["requests_total"] for p in r.summary["policies"]] == [40, 40]
    assert r.policies["none"]["oom_events"] >= 1


def test_seed_and_set_are_the_clis_set(scenario, tmp_path):
    cli("run", scenario, "-o", str(tmp_path / "cli"), "--set", "workload.max_requests=20",
        "--set", "seed=9")
    r = kvsim.run(scenario, seed=9, set={"workload.max_requests": 20})
    r.write(str(tmp_path / "py"))
    for name in FILES:
        assert read(tmp_path / "py", name) == read(tmp_path / "cli", name), name
    assert r.manifest["seed"] == 9
    assert r.summary["policies"][0]["requests_total"] == 20


def test_yaml_text_and_dict_scenarios(scenario):
    from_file = kvsim.run(scenario)
    from_text = kvsim.run(SMALL)
    assert from_text.summary == from_file.summary
    assert from_text.manifest["scenario_source"] == "<string>"
    # A dict reaches the loader as JSON text (flow style): the same run, another scenario_hash.
    as_dict = json.loads(json.dumps({
        "name": "small", "description": "pytest: 40 requests, two policies", "seed": 5,
        "model": "seed-7b-mha",
        "gpu": {"name": "small", "memory_gb": 24, "hbm_gb_per_s": 2000, "fp16_tflops": 312},
        "engine": {"kv": {"type": "caching_allocator", "growth": "preallocate"},
                   "on_oom": "crash", "restart_s": 5, "max_model_len": 8192},
        "workload": {"arrivals": {"type": "poisson", "rate": 4}, "max_requests": 40,
                     "prompt_tokens": {"type": "uniform", "min": 512, "max": 6000},
                     "output_tokens": {"type": "fixed", "value": 64}},
        "policies": [{"name": "none", "guards": []},
                     {"name": "reserve", "guards": [{"type": "reserve"}]}]}))
    from_dict = kvsim.run(as_dict)
    assert from_dict.summary["policies"] == from_file.summary["policies"]


def test_policies_selects_by_name(scenario):
    r = kvsim.run(scenario, policies=["reserve"])
    assert [p["name"] for p in r.summary["policies"]] == ["reserve"]
    assert r.summary["policies"][0] == kvsim.run(scenario).policies["reserve"]
    with pytest.raises(kvsim.ConfigError, match=r"small\.yaml:\d+:\d+: .*no policy named 'nope'"):
        kvsim.run(scenario, policies=["nope"])


def test_requests_and_timeseries_columns_and_dtypes(scenario):
    pd = pytest.importorskip("pandas")
    r = kvsim.run(scenario)
    req = r.requests
    assert isinstance(req, pd.DataFrame)
    assert list(req.columns) == [
        "policy", "id", "arrival_s", "prompt_tokens", "prompt_tokens_served", "output_tokens",
        "generated", "outcome", "ttft_s", "tpot_s", "e2e_s", "preemptions", "tokens_dropped",
        "guard_queue_s", "engine_wait_s", "prefill_s", "decode_s", "preempted_s"]
    # Two policies x 40 requests, ids 0..39 in order within each policy.
    assert len(req) == 80
    assert list(req[req.policy == "reserve"].id) == list(range(40))
    ints = ["id", "prompt_tokens", "prompt_tokens_served", "output_tokens", "generated",
            "preemptions", "tokens_dropped"]
    for c in ints:
        assert req[c].dtype == "int64", c
    for c in ["arrival_s", "ttft_s", "tpot_s", "e2e_s", "guard_queue_s", "engine_wait_s",
              "prefill_s", "decode_s", "preempted_s"]:
        assert req[c].dtype == "float64", c
    assert req.policy.dtype == object and req.outcome.dtype == object
    # Lost requests have no latency (NaN); served ones do.
    served = req[req.outcome == "completed"]
    assert served.e2e_s.notna().all()
    ts = r.timeseries
    assert list(ts.columns[:2]) == ["policy", "t_s"]
    assert list(ts.columns[-3:]) == ["guard_queue", "waiting", "running"]
    byte_columns = [c for c in ts.columns if c.endswith("_bytes")]
    assert len(byte_columns) == 9 + 3  # nine memory categories + the three allocator views
    for c in byte_columns + ["guard_queue", "waiting", "running"]:
        assert ts[c].dtype == "int64", c
    # Every sample's categories sum to the GPU's 24 GB.
    categories = byte_columns[:9]
    assert (ts[categories].sum(axis=1) == 24_000_000_000).all()


def test_errors_carry_the_clis_position(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(SMALL.replace("restart_s: 5", "restart_s: five"))
    p = cli("run", str(bad), "--no-output", check=False)
    assert p.returncode == 2
    message = p.stderr.strip().removeprefix("kvsim: error: ")
    with pytest.raises(kvsim.ConfigError) as e:
        kvsim.run(str(bad))
    assert str(e.value) == message
    # restart_s is on line 9, its value at column 14.
    assert str(e.value).startswith(str(bad) + ":9:14: ")
    # YAML text is named <string>; ConfigError is an InputError.
    with pytest.raises(kvsim.InputError, match=r"^<string>:9:14: "):
        kvsim.run(SMALL.replace("restart_s: 5", "restart_s: five"))
    # The shipped bad-input cases give the same line as their .expected file.
    case = os.path.join(SOURCE, "tests", "data", "bad", "scenario", "bad-dtype.yaml")
    with open(case.replace(".yaml", ".expected")) as f:
        expected = f.read().strip()
    with pytest.raises(kvsim.ConfigError) as e:
        kvsim.run(case)
    assert expected in str(e.value)
    with pytest.raises(kvsim.InputError, match="nope.yaml"):
        kvsim.run(str(tmp_path / "nope.yaml"))


def test_sweep_on_threads_matches_the_cli(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    cli("sweep", str(path), "-o", str(tmp_path / "cli"), "-j", "1", "--no-progress")
    s = kvsim.sweep(str(path), out=str(tmp_path / "py"), jobs=3)
    assert read(tmp_path / "py", "summary.csv") == read(tmp_path / "cli", "summary.csv")
    # Three rates x two policies.
    assert len(s.summary) == 6
    assert list(s.summary["workload.arrivals.rate"]) == [2, 2, 4, 4, 8, 8]
    point = s.point(sorted(os.listdir(tmp_path / "py" / "points"))[0])
    assert point.summary["policies"][0]["name"] == "none"
    # A temporary sweep folder: the same rows.
    assert kvsim.sweep(str(path), jobs=2).summary_csv == s.summary_csv


def test_runs_on_python_threads_are_independent(scenario):
    # The GIL is released while simulating; concurrent runs must not share state.
    expected = kvsim.run(scenario).files
    results = [None] * 4

    def work(i):
        results[i] = kvsim.run(scenario).files

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == expected for r in results)


def test_catalogs_kv_and_latency_match_the_clis_json():
    pd = pytest.importorskip("pandas")
    models = kvsim.models()
    assert models.to_dict("records") == json.loads(cli("models", "--json").stdout)
    assert kvsim.gpus().to_dict("records") == json.loads(cli("gpus", "--json").stdout)
    kv = kvsim.kv("seed-7b-mha", [4096, 32768], batch=2, gpu="a100-sxm4-80gb")
    cli_kv = json.loads(cli("kv", "--model", "seed-7b-mha", "--seq", "4096,32768", "--batch", "2",
                            "--gpu", "a100-sxm4-80gb", "--json").stdout)
    assert kv.to_dict("records") == cli_kv
    # seed-7b-mha: 32 layers x 32 heads x 128 x 2 (K and V) x 2 bytes = 524,288 B per token;
    # 4,096 tokens x 2 requests = 4,294,967,296 B.
    assert kv.kv_bytes_total[0] == 4_294_967_296
    lat = kvsim.latency("seed-7b-mha", "h100-sxm", [1024, 8192], batch=[1, 4])
    cli_lat = json.loads(cli("latency", "--model", "seed-7b-mha", "--gpu", "h100-sxm", "--seq",
                             "1024,8192", "--batch", "1,4", "--json").stdout)
    assert lat.to_dict("records") == cli_lat
    assert isinstance(lat, pd.DataFrame) and len(lat) == 4


def test_timeline_from_python(scenario, tmp_path):
    path = tmp_path / "t.json"
    r = kvsim.run(scenario, timeline=str(path), timeline_window=(0, 5))
    trace = json.loads(path.read_text())
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert slices and all(e["ts"] < 5e6 for e in slices)
    assert {e["pid"] for e in slices} == {1, 2}
    assert r.policies["none"]["oom_events"] >= 1


def test_plot_renders_the_clis_figures(scenario, tmp_path):
    pytest.importorskip("matplotlib")
    figures = kvsim.run(scenario).plot(str(tmp_path / "run"))
    assert figures and all(os.path.getsize(f) > 0 for f in figures)
    assert any(f.endswith(".png") for f in figures)
