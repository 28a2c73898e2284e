"""Fixtures for the CLI tests: the virtual sound card, for the commands that need audio devices (`run`, `ptt`)."""

from __future__ import annotations

import pytest

from toy_runtime.testing.services import unavailable


@pytest.fixture(scope="session")
def sound_card():
    """A private headless PulseAudio ("mic", "speaker"); the CLI subprocesses get its variables explicitly."""
    from toy_runtime.testing.pulse import VirtualSoundCard, pulseaudio_available

    if not pulseaudio_available():
        unavailable("pulseaudio / pulseaudio-utils are not installed (apt install pulseaudio pulseaudio-utils)")
    card = VirtualSoundCard()
    try:
        card.start()
    except RuntimeError as exc:
        unavailable(f"the virtual sound card did not start: {exc}")
    try:
        yield card
    finally:
        card.stop()
