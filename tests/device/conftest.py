"""Fixtures for the device tests: a private headless PulseAudio (real ALSA `Master` via the pulse CTL) and the mixers
under contract."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from toy_runtime.testing.broker import MosquittoBroker, start_broker_for_test
from toy_runtime.testing.pulse_mixer import PulseMixerServer, start_pulse_mixer_for_test


@pytest.fixture(scope="module")
def pulse() -> Iterator[PulseMixerServer]:
    server = start_pulse_mixer_for_test()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fresh_pulse(pulse: PulseMixerServer) -> PulseMixerServer:
    """The shared server reset to 50 %, unmuted."""
    pulse.set_sink_volume_pct(50)
    pulse.set_sink_muted(False)
    return pulse


@pytest.fixture
def broker() -> Iterator[MosquittoBroker]:
    b = start_broker_for_test()
    try:
        yield b
    finally:
        b.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark this folder's tests `audio` (and `mqtt` when they need a broker) so `-m` can skip them where PulseAudio or
    mosquitto is missing."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            callspec = getattr(item, "callspec", None)
            real_mixer = callspec is not None and str(callspec.params.get("mixer", "")).startswith("alsa")
            if real_mixer or "fresh_pulse" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.audio)
            if "broker" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.mqtt)
