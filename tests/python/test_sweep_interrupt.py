"""Ctrl-C stops a long sweep: kvsim.sweep polls for signals on its own thread while the points
run on worker threads (Python runs signal handlers only on its main thread, when asked), so
KeyboardInterrupt takes effect within moments, not when every point has finished. The points cut
short write nothing: no "<name>.tmp.<pid>" is left in the sweep folder."""

import os

from interrupt_helper import ctrl_c_during

# Two points of fifty million requests each: minutes of simulation per point.
LONG_SWEEP = """\
name: long-sweep
seed: 1
model: seed-7b-mha
gpu: a100-sxm4-80gb
workload:
  arrivals: {type: fixed, rate: 4}
  max_requests: 50000000
  prompt_tokens: 512
  output_tokens: 8
policies: [{name: none, guards: []}]
sweep:
  grid:
    seed: [1, 2]
"""


def _interrupt_sweep(tmp_path, jobs):
    out = tmp_path / f"sweep-j{jobs}"
    ctrl_c_during("kvsim.sweep(%r, out=%r, jobs=%d)" % (LONG_SWEEP, str(out), jobs))
    left = [name for _, _, files in os.walk(out) for name in files if ".tmp." in name]
    assert left == []


def test_ctrl_c_stops_a_sweep_on_worker_threads(tmp_path):
    _interrupt_sweep(tmp_path, jobs=2)


def test_ctrl_c_stops_a_sweep_on_one_job(tmp_path):
    _interrupt_sweep(tmp_path, jobs=1)
