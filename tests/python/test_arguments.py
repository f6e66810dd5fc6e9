"""The Python module's arguments and interruption: the library checks every range the CLI checks
(sim/run/arguments.h), Python checks types, and each message names the argument. A config.json
the reader rejects is kvsim.InputError, never a bare RuntimeError. Ctrl-C stops a long run."""

import math
import os
import subprocess
import sys
import time

import pytest

import kvsim
from interrupt_helper import ctrl_c_during

SOURCE = os.environ.get("KVSIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))

TINY = """\
name: tiny
seed: 1
model: seed-7b-mha
gpu: a100-sxm4-80gb
workload:
  arrivals: {type: fixed, rate: 4}
  max_requests: 4
  prompt_tokens: 512
  output_tokens: 8
policies: [{name: none, guards: []}]
"""


def _run_quietly(code, timeout):
    """Runs `code` in a fresh interpreter with this one's path; returns (returncode, stderr, s)."""
    started = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=timeout, env=dict(os.environ))
    return p.returncode, p.stderr, time.monotonic() - started


@pytest.mark.parametrize("interval", [0, -1, 1e-9, math.nan, math.inf])
def test_sample_interval_out_of_range_is_refused_at_once(interval):
    # 0, -1 and 1e-9 ran forever at a constant 68 MB; nan wrote an empty timeseries. In a child
    # interpreter, so a regression fails on the timeout instead of hanging the suite.
    code = "import kvsim\ntry:\n    kvsim.run(%r, sample_interval=float(%r))\n" \
           "except kvsim.InputError as e:\n    print(e)\n    raise SystemExit(7)\n" % (TINY, repr(interval))
    rc, err, _ = _run_quietly(code, timeout=60)
    assert rc == 7, err


def test_sample_interval_message_names_the_argument():
    with pytest.raises(kvsim.InputError, match=r"^sample_interval: expected a timeseries period"):
        kvsim.run(TINY, sample_interval=0)


def test_timeline_window_must_be_ordered(tmp_path):
    with pytest.raises(kvsim.InputError, match=r"^timeline_window: expected START < END"):
        kvsim.run(TINY, timeline=tmp_path / "t.json", timeline_window=(5, 1))
    with pytest.raises(TypeError, match=r"^timeline_window: expected \(start, end\)"):
        kvsim.run(TINY, timeline=tmp_path / "t.json", timeline_window=(5,))
    with pytest.raises(kvsim.InputError, match=r"^timeline_window: expected simulated seconds"):
        kvsim.run(TINY, timeline=tmp_path / "t.json", timeline_window=(-1, 2))


@pytest.mark.parametrize("seed", [1.5, "abc", True, [1]])
def test_seed_must_be_an_integer(seed):
    # 1.5 silently ran seed 1; "abc" surfaced as "%d format: ...".
    with pytest.raises(TypeError, match=r"^seed: expected an integer"):
        kvsim.run(TINY, seed=seed)


def test_sweep_jobs_is_checked(tmp_path):
    sweep = TINY + "sweep:\n  grid:\n    workload.arrivals.rate: [2, 4]\n"
    with pytest.raises(kvsim.InputError, match=r"^jobs: expected a whole number"):
        kvsim.sweep(sweep, out=tmp_path / "s", jobs=-1)
    with pytest.raises(TypeError, match=r"^jobs: expected an integer"):
        kvsim.sweep(sweep, out=tmp_path / "s", jobs="2")


def test_kv_and_latency_ranges_are_the_clis():
    # kv(model, [-5]) returned a row; the CLI refuses --seq -5.
    with pytest.raises(kvsim.InputError, match=r"^seq: expected a whole number"):
        kvsim.kv("seed-7b-mha", [-5])
    with pytest.raises(kvsim.InputError, match=r"^batch: expected a whole number"):
        kvsim.kv("seed-7b-mha", 1024, batch=0)
    with pytest.raises(TypeError, match=r"^seq\[1\]: expected an integer"):
        kvsim.kv("seed-7b-mha", [1024, 2.5])
    with pytest.raises(TypeError, match=r"^seq: expected an integer or a list"):
        kvsim.kv("seed-7b-mha", "1024")
    # Beyond 64 bits: pybind11 raised its own TypeError listing the signature.
    with pytest.raises(ValueError, match=r"^seq\[0\]: expected an integer from -9223372036854775808 "
                       r"to 9223372036854775807, got 10{30}$"):
        kvsim.kv("llama-3-8b", [10**30])
    with pytest.raises(ValueError, match=r"^batch: expected an integer from"):
        kvsim.kv("llama-3-8b", 1024, batch=2**63)
    with pytest.raises(kvsim.InputError, match=r"^tp: expected a whole number"):
        kvsim.latency(tp=0)
    with pytest.raises(kvsim.InputError, match=r"^capacity_gb: expected"):
        kvsim.kv("seed-7b-mha", 1024, capacity_gb=-1)


def test_a_config_json_the_reader_rejects_is_kvsims_error():
    # A number that overflows a double was nlohmann's out_of_range, a bare RuntimeError here; a
    # 100,000-deep list crashed the interpreter.
    for name, expected in [("number-overflow.json", "number overflow parsing '1e400'"),
                           ("deep-nesting.json", "got a list of 1 element(s)")]:
        path = os.path.join(SOURCE, "tests", "data", "bad", "hf-config", name)
        scenario = TINY.replace("model: seed-7b-mha", "model: %s" % path)
        with pytest.raises(kvsim.InputError) as e:
            kvsim.run(scenario)
        assert expected in str(e.value)
        assert "\n" not in str(e.value) and len(str(e.value)) < 500


def test_ctrl_c_stops_a_long_run_promptly():
    # Fifty million requests: minutes of simulation. SIGINT two seconds in must raise
    # KeyboardInterrupt within seconds (it took effect only when the run finished).
    long_run = TINY.replace("max_requests: 4", "max_requests: 50000000")
    ctrl_c_during("kvsim.run(%r)" % long_run)
