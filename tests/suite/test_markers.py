"""The one pytest plugin: its markers are registered, the README's fast lane deselects exactly them, and the rule
that marks a test `models` sees a CLI child process or a model adapter, also through a helper or a fixture."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from toy_runtime.testing import pytest_plugin
from toy_runtime.testing.pytest_plugin import FAST_LANE_EXCLUDES, FIXTURE_MARKERS, _loads_models

pytest_plugins = ["pytester"]  # a throw-away test directory collected by a pytest of its own

ROOT = Path(__file__).resolve().parents[2]


def test_every_marker_is_registered_and_the_readme_fast_lane_deselects_them_all() -> None:
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    registered = {line.split(":", 1)[0] for line in ini["markers"]}
    assert set(FAST_LANE_EXCLUDES) | set(FIXTURE_MARKERS.values()) <= registered
    lane = re.search(r'python -m pytest -q -n auto -m "not \(([^)]*)\)"', (ROOT / "README.md").read_text())
    assert lane is not None
    assert set(lane.group(1).split(" or ")) == set(FAST_LANE_EXCLUDES)


def test_every_marked_fixture_is_the_plugins_own() -> None:
    for fixture in FIXTURE_MARKERS:
        assert callable(getattr(pytest_plugin, fixture, None)), fixture


def _spawns_the_cli() -> None:
    subprocess.run([sys.executable, "-m", "toy_runtime", "--help"], check=False)


def _calls_a_spawner() -> None:
    _spawns_the_cli()


def _builds_a_voice() -> None:
    from toy_runtime.adapters.piper_tts import PiperSynthesizer

    PiperSynthesizer(deterministic=True)


def _runs_a_helper_module() -> None:
    subprocess.run([sys.executable, "-m", "toy_runtime.testing.scripted_llm", "--help"], check=False)


def _pure() -> None:
    assert sorted([3, 1]) == [1, 3]


# held in a dict, not named by the test: the rule follows the helpers a test calls, and this test calls none
CASES = {"cli": _spawns_the_cli, "through a helper": _calls_a_spawner, "a voice": _builds_a_voice,
         "a server's own entry point": _runs_a_helper_module, "pure": _pure}


def test_the_models_rule_sees_a_cli_child_a_model_and_a_helper_that_does_either() -> None:
    seen = {name: _loads_models(case) for name, case in CASES.items()}
    assert seen == {"cli": True, "through a helper": True, "a voice": True,
                    "a server's own entry point": False, "pure": False}


MODULE_FIXTURE_TESTS = '''
import pytest

from toy_runtime.adapters.piper_split import split_voice


@pytest.fixture(scope="module")
def voice_split(tmp_path_factory):
    return split_voice("joe.onnx", tmp_path_factory.mktemp("cache"))  # never called: the tests are only collected


@pytest.fixture
def through_another(voice_split):
    return voice_split


def test_uses_the_module_fixture(voice_split):
    pass


def test_uses_it_through_another_fixture(through_another):
    pass


def test_pure(tmp_path):
    pass
'''


def test_a_fixture_that_loads_a_model_marks_every_test_that_uses_it_at_any_scope(pytester) -> None:
    """tests/audio/test_piper_split.py splits the voice once, in a module fixture: its tests leave the fast lane."""
    pytester.makeconftest('pytest_plugins = ["toy_runtime.testing.pytest_plugin"]\n')
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_split=MODULE_FIXTURE_TESTS)
    lane = pytester.runpytest("--collect-only", "-q", "-m", "not models")
    assert [line for line in lane.outlines if "::" in line] == ["test_split.py::test_pure"]
