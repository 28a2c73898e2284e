"""Volume through the runtime's mixer adapter is audible: the same burst recorded at the mic drops by a clear margin
when the rig's ALSA mixer goes from 100 % to 30 % (virtual rig: ALSA `pulse`/`Master` = the speaker sink's volume)."""

from __future__ import annotations

import pytest

from tests.hil.conftest import unavailable
from tests.hil.probe import chirp, shoot

pytestmark = pytest.mark.hil

MIN_DROP_DB = 6.0


@pytest.fixture
def mixer(rig):
    if rig.mixer_device is None:
        pytest.skip("no mixer= in TOY_HIL_DEVICES (e.g. mixer=hw:1/PCM): the volume test needs the speaker's mixer")
    try:
        import alsaaudio  # noqa: F401
    except ImportError:
        unavailable("pyalsaaudio is not installed (pip install pyalsaaudio; apt install libasound2-dev)")
    from toy_runtime.adapters.alsa_mixer import AlsaMixer

    return AlsaMixer(device=rig.mixer_device, control=rig.mixer_control)


async def test_lower_mixer_level_is_heard_quieter(rig, mixer):
    from toy_runtime.adapters.sounddevice_io import SoundDeviceSink, SoundDeviceSource

    before = await mixer.get()
    burst = chirp()
    levels = {}
    try:
        if before.muted:
            await mixer.set_muted(False)
        for percent in (100, 30):
            state = await mixer.set_level(percent)
            assert state.level == percent and not state.muted, state
            levels[percent] = await shoot(SoundDeviceSource(rig.mic, block_frames=1),
                                          SoundDeviceSink(rig.speaker, sample_rate_hz=16000), burst)
    finally:
        await mixer.set_level(before.level)
        await mixer.set_muted(before.muted)

    loud, quiet = levels[100], levels[30]
    drop = loud.burst_dbfs - quiet.burst_dbfs
    print(f"\n[hil {rig.mode}] {mixer!r} 100 %: {loud}\n[hil {rig.mode}] {mixer!r}  30 %: {quiet}\n"
          f"[hil {rig.mode}] drop {drop:.1f} dB")
    assert loud.snr_db >= 15.0, f"the burst at 100 % is not clearly heard: {loud}"
    assert quiet.snr_db >= 6.0, f"30 % should be quieter, not silent (a mute?): {quiet}"
    assert drop >= MIN_DROP_DB, f"30 % is only {drop:.1f} dB quieter than 100 % ({loud} / {quiet})"
    assert (await mixer.get()).level == before.level
