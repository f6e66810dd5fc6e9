"""`python3 scripts/kvsim_plot ARGS` (how kvsim runs it) or `python3 -m kvsim_plot ARGS`."""
import os
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in the source tree or install prefix
if not __package__:  # run as a folder: import the package from the folder above it
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from kvsim_plot.cli import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
