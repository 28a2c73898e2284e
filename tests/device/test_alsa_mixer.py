"""AlsaMixer specifics on a real ALSA mixer (the pulse CTL over a headless PulseAudio null sink): pactl agrees,
outside changes are seen, remembered-volume mute, structured errors, the percent ↔ raw mapping."""

from __future__ import annotations

import pytest

from toy_runtime.adapters.alsa_mixer import AlsaMixer, percent_to_raw, raw_to_percent
from toy_runtime.ports.device import MixerError, MixerState
from toy_runtime.testing.pulse_mixer import PulseMixerServer


@pytest.fixture
def alsa(fresh_pulse: PulseMixerServer) -> AlsaMixer:
    mixer = AlsaMixer(device="pulse", control="Master")
    yield mixer
    mixer.close()


async def test_pactl_sees_every_change(alsa: AlsaMixer, fresh_pulse: PulseMixerServer):
    await alsa.set_level(35)
    assert fresh_pulse.sink_volume_pct() == 35
    await alsa.set_muted(True)
    assert fresh_pulse.sink_muted() is True
    assert fresh_pulse.sink_volume_pct() == 35  # the switch mutes, the level stays
    await alsa.set_muted(False)
    assert fresh_pulse.sink_muted() is False


async def test_outside_changes_are_seen_by_a_long_lived_mixer(alsa: AlsaMixer, fresh_pulse: PulseMixerServer):
    assert (await alsa.set_level(20)).level == 20  # opens and caches the ALSA handle
    fresh_pulse.set_sink_volume_pct(73)  # another program changes it
    assert await alsa.get() == MixerState(level=73, muted=False)
    fresh_pulse.set_sink_muted(True)
    assert await alsa.get() == MixerState(level=73, muted=True)
    fresh_pulse.set_sink_volume_pct(150)  # PulseAudio allows boosting past 100 %
    assert (await alsa.get()).level == 100


async def test_remembered_volume_mute_without_a_switch(fresh_pulse: PulseMixerServer):
    mixer = AlsaMixer(device="pulse", control="Master", mute_mode="volume")
    try:
        await mixer.set_level(45)
        assert await mixer.set_muted(True) == MixerState(level=45, muted=True)
        assert fresh_pulse.sink_volume_pct() == 0 and fresh_pulse.sink_muted() is False
        assert await mixer.set_level(60) == MixerState(level=60, muted=True)  # remembered, still silent
        assert fresh_pulse.sink_volume_pct() == 0
        assert await mixer.set_muted(False) == MixerState(level=60, muted=False)
        assert fresh_pulse.sink_volume_pct() == 60

        await mixer.set_muted(True)
        fresh_pulse.set_sink_volume_pct(30)  # turned up from outside: no longer muted
        assert await mixer.get() == MixerState(level=30, muted=False)
    finally:
        mixer.close()


async def test_unknown_control_lists_the_available_ones(fresh_pulse: PulseMixerServer):
    with pytest.raises(MixerError) as err:
        await AlsaMixer(device="pulse", control="Speaker").get()
    assert err.value.code == "no_such_control"
    assert "Master" in err.value.available
    assert "Speaker" in err.value.message and "Master" in err.value.message


async def test_unknown_device_is_a_structured_error(fresh_pulse: PulseMixerServer):
    with pytest.raises(MixerError) as err:
        await AlsaMixer(device="hw:57", control="Master").set_level(10)
    assert err.value.code == "no_such_device"
    assert "hw:57" in err.value.message


async def test_a_capture_control_is_refused(fresh_pulse: PulseMixerServer):
    with pytest.raises(MixerError) as err:
        await AlsaMixer(device="pulse", control="Capture").check()
    assert err.value.code == "not_a_playback_control"
    assert set(err.value.available) >= {"Master", "Capture"}


def test_available_controls(fresh_pulse: PulseMixerServer):
    assert "Master" in AlsaMixer(device="pulse").available_controls()


@pytest.mark.parametrize(("lo", "hi"), [(0, 65536), (0, 31), (0, 255), (-10, 10), (0, 100)])
def test_percent_raw_mapping_is_stable(lo: int, hi: int):
    previous = None
    for percent in range(101):
        raw = percent_to_raw(percent, lo, hi)
        assert lo <= raw <= hi
        shown = raw_to_percent(raw, lo, hi)
        assert percent_to_raw(shown, lo, hi) == raw  # re-applying a read-back value changes nothing
        if previous is not None:
            assert raw >= previous  # monotonic
        previous = raw
    assert percent_to_raw(-5, lo, hi) == lo and percent_to_raw(250, lo, hi) == hi
    assert raw_to_percent(hi * 2 if hi > 0 else hi + 1000, lo, hi) == 100
