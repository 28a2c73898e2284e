"""Fixtures for the observability tests: hermetic settings and the doctor's child environment. The real services
the doctor checks against (`broker_with_users`, `pulse_mixer`, `sound_card`) are the one plugin's fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable

import pytest

from toy_runtime.testing.services import child_env

from toy_runtime.config import Settings, load_settings
from toy_runtime.doctor import CHECKS

ROOT = Path(__file__).resolve().parents[2]


def only(*names: str) -> list[str]:
    """The `skip` list that leaves just `names` running (config always runs)."""
    return [c for c in CHECKS[1:] if c not in names]


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., Settings]:
    """`make_settings(TOY_LLM__BASE_URL=...)` → settings from exactly these variables, state under tmp_path."""

    def make(**env: str) -> Settings:
        return load_settings(env={"TOY_STATE_DIR": str(tmp_path / "state"), **env})

    return make


def doctor_child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for `python -m toy_runtime doctor` in a child: ours minus TOY_/OPENAI_/PULSE_ settings."""
    env = child_env(drop=("PULSE_",))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


PYTHON = sys.executable
