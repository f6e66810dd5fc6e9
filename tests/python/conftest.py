"""Splits the Python tests into two ctest entries (tests/python/CMakeLists.txt), chosen by
KVSIM_PYTEST_PART: `optional`, the tests that need an optional package (their body calls
pytest.importorskip: pandas, matplotlib), and `required`, the rest (unset: every test). Both
entries mark themselves Skipped when pytest skips anything ("N skipped" in its summary line), so
a test that could not run is never counted as passed, and the required tests still pass or fail
on their own when an optional package is missing."""
import inspect
import os


def _needs_optional_package(item):
    try:
        return "importorskip" in inspect.getsource(item.function)
    except (OSError, TypeError, AttributeError):
        return False


def pytest_collection_modifyitems(config, items):
    part = os.environ.get("KVSIM_PYTEST_PART")
    if part not in ("optional", "required"):
        return
    keep, drop = [], []
    for item in items:
        (keep if _needs_optional_package(item) == (part == "optional") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
