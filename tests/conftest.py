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
