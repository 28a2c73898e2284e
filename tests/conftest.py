"""The suite's one plugin: every service fixture (broker, sound card, mixer, scripted LLM, SearxNG, speech) and the
markers that follow them are defined in `toy_runtime/testing/pytest_plugin.py`."""

import os
import sys

# This machine (and CI) sets PYTHONDONTWRITEBYTECODE=1. Without bytecode caches every run compiles the package again
# and rewrites every test module's asserts again (collecting the fast lane: 4.6 s without them, 1.8 s with), and
# every `python -m toy_runtime` a test starts compiles what it imports again. The suite keeps the caches
# (__pycache__ is gitignored), for itself and for the processes it starts.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

pytest_plugins = ["toy_runtime.testing.pytest_plugin"]

# `[session] timezone` defaults to the machine's zone: the suite pins it (children inherit it) so a run on a laptop
# in Shanghai expects what CI expects; tests about the zone itself set TZ themselves.
os.environ["TZ"] = "UTC"


def pytest_collection_finish(session) -> None:
    """Run in one process, the suite keeps one core busy: mypy (tests/suite/test_types.py), when selected, starts
    now and checks the package on the other core while the tests before it run. Not under xdist (its controller
    collects nothing, and each worker would start its own): there the test runs mypy in its worker."""
    if os.environ.get("PYTEST_XDIST_WORKER") or session.config.option.collectonly:
        return
    from tests.suite import test_types

    if any(item.nodeid == test_types.TEST_ID for item in session.items):
        session.config.stash[test_types.EARLY_MYPY] = test_types.start_mypy()


def pytest_unconfigure(config) -> None:
    """A run stopped before the type check (-x, Ctrl-C) leaves no mypy behind."""
    from tests.suite import test_types

    proc = config.stash.get(test_types.EARLY_MYPY, None)
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.communicate()
