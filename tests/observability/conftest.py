"""Fixtures for the observability tests: hermetic settings, and the real services the doctor checks against
(private mosquitto, headless PulseAudio for the ALSA `pulse` mixer, a virtual sound card). Where a service cannot
run here the test is skipped, unless CI sets TOY_REQUIRE_SERVICES=1 (then it fails)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from toy_runtime.testing.services import service_unavailable, child_env

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


@pytest.fixture
def broker_with_users() -> Iterator[Any]:
    """A private mosquitto that only lets `toy` / `s3cret` in."""
    from toy_runtime.testing.broker import start_broker_for_test

    broker = start_broker_for_test(users={"toy": "s3cret"})
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture(scope="module")
def pulse_mixer() -> Iterator[Any]:
    """A headless PulseAudio whose null sink the ALSA `pulse` device exposes as `Master` (PULSE_SERVER set)."""
    from toy_runtime.testing.pulse_mixer import start_pulse_mixer_for_test

    server = start_pulse_mixer_for_test()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def sound_card() -> Iterator[Any]:
    """A virtual sound card (mic + speaker) for a doctor run in a child process (PortAudio reads the devices once
    per process, so the card must exist before the child starts)."""
    from toy_runtime.testing.pulse import VirtualSoundCard, pulseaudio_available

    if not pulseaudio_available():
        service_unavailable("PulseAudio", RuntimeError("pulseaudio / pulseaudio-utils are not installed"))
    card = VirtualSoundCard()
    try:
        card.start()
    except RuntimeError as exc:
        service_unavailable("PulseAudio", exc)
    try:
        yield card
    finally:
        card.stop()


def doctor_child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for `python -m toy_runtime doctor` in a child: ours minus TOY_/OPENAI_/PULSE_ settings."""
    env = child_env(drop=("PULSE_",))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


PYTHON = sys.executable
