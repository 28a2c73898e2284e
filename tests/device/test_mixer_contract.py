"""One contract for the `Mixer` port, run against the in-memory fake and the real ALSA adapter (PulseAudio's
`Master` through ALSA's pulse CTL), so the fake cannot drift from the device."""

from __future__ import annotations

import asyncio
import importlib

import pytest

from toy_runtime.ports.device import Mixer, MixerState


def _memory_mixer() -> Mixer:
    try:
        module = importlib.import_module("toy_runtime.fakes.device")
    except ImportError:
        pytest.skip("toy_runtime.fakes.device.MemoryMixer is not available")
    return module.MemoryMixer(level=50, muted=False)


@pytest.fixture(params=["memory", pytest.param("alsa", marks=pytest.mark.mixer),
                        pytest.param("alsa-long-lived", marks=pytest.mark.mixer)])
def mixer(request: pytest.FixtureRequest) -> Mixer:
    if request.param == "memory":
        return _memory_mixer()
    request.getfixturevalue("fresh_pulse")
    from toy_runtime.adapters.alsa_mixer import AlsaMixer

    return AlsaMixer(device="pulse", control="Master", reopen_per_call=request.param == "alsa")


async def test_get_reports_percent_and_mute(mixer: Mixer):
    state = await mixer.get()
    assert state == MixerState(level=50, muted=False)


async def test_set_level_returns_the_read_back_state(mixer: Mixer):
    assert await mixer.set_level(30) == MixerState(level=30, muted=False)
    assert await mixer.get() == MixerState(level=30, muted=False)


async def test_relative_change_via_get_and_set(mixer: Mixer):
    before = await mixer.get()
    after = await mixer.set_level(before.level + 15)
    assert after.level == before.level + 15
    after = await mixer.set_level(after.level - 40)
    assert after.level == before.level + 15 - 40


@pytest.mark.parametrize(("asked", "got"), [(150, 100), (101, 100), (-20, 0), (0, 0), (100, 100)])
async def test_levels_are_clamped(mixer: Mixer, asked: int, got: int):
    assert (await mixer.set_level(asked)).level == got
    assert (await mixer.get()).level == got


async def test_mute_and_unmute_keep_the_level(mixer: Mixer):
    await mixer.set_level(40)
    assert await mixer.set_muted(True) == MixerState(level=40, muted=True)
    assert await mixer.get() == MixerState(level=40, muted=True)
    assert await mixer.set_muted(True) == MixerState(level=40, muted=True)  # idempotent
    assert await mixer.set_muted(False) == MixerState(level=40, muted=False)
    assert await mixer.get() == MixerState(level=40, muted=False)


async def test_set_level_while_muted_stays_muted(mixer: Mixer):
    await mixer.set_muted(True)
    assert await mixer.set_level(70) == MixerState(level=70, muted=True)
    assert await mixer.set_muted(False) == MixerState(level=70, muted=False)


async def test_every_level_reads_back_exactly(mixer: Mixer):
    for level in (0, 1, 7, 33, 50, 66, 99, 100):
        assert (await mixer.set_level(level)).level == level


async def test_concurrent_calls_end_consistent(mixer: Mixer):
    await asyncio.gather(*(mixer.set_level(level) for level in range(10, 60, 5)))
    state = await mixer.get()
    assert 10 <= state.level <= 55 and state.level % 5 == 0
