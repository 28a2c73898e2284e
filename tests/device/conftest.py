"""Fixtures for the device tests: the mixer server (`pulse_mixer`, from the one plugin) reset for each test."""

from __future__ import annotations

import pytest

from toy_runtime.testing.pulse_mixer import PulseMixerServer


@pytest.fixture
def fresh_pulse(pulse_mixer: PulseMixerServer) -> PulseMixerServer:
    """The shared server reset to 50 %, unmuted."""
    pulse_mixer.set_sink_volume_pct(50)
    pulse_mixer.set_sink_muted(False)
    return pulse_mixer
