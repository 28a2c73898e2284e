"""The suite's one plugin: every service fixture (broker, sound card, mixer, scripted LLM, SearxNG, speech) and the
markers that follow them are defined in `toy_runtime/testing/pytest_plugin.py`."""

import os

pytest_plugins = ["toy_runtime.testing.pytest_plugin"]

# `[session] timezone` defaults to the machine's zone: the suite pins it (children inherit it) so a run on a laptop
# in Shanghai expects what CI expects; tests about the zone itself set TZ themselves.
os.environ["TZ"] = "UTC"
