"""Reading a result folder: CSV and JSON files, numbers that may be blank, and matplotlib itself.
Bad or missing input raises InputProblem, which the entry point reports as one line (exit 2)."""
import csv
import hashlib
import json
import os


class InputProblem(Exception):
    """Bad or missing input: reported as one line, exit 2."""


def read_csv(path):
    if not os.path.isfile(path):
        raise InputProblem(f"{path}: missing")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_json(path):
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise InputProblem(f"{path}: not JSON: {e}")


def num(s, default=float("nan")):
    try:
        return float(s)
    except (TypeError, ValueError):
        return default


def files_sha256(paths):
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(os.path.basename(p).encode() + b"\0")
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def policies_in_order(rows):
    """The policies of CSV rows, in order of first appearance."""
    seen = []
    for r in rows:
        if r["policy"] not in seen:
            seen.append(r["policy"])
    return seen


def import_matplotlib():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputProblem("matplotlib is missing: install Debian's python3-matplotlib "
                           "(scripts/setup.sh does) and run with /usr/bin/python3")
    return plt
