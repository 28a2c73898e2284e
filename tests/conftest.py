"""The suite's one plugin: every service fixture (broker, sound card, mixer, scripted LLM, SearxNG, speech) and the
markers that follow them are defined in `toy_runtime/testing/pytest_plugin.py`."""

pytest_plugins = ["toy_runtime.testing.pytest_plugin"]
