"""Speaker → mic through the rig: the runtime's own adapters hear a chirp burst above the noise floor, and the
write-to-capture latency is measured by cross-correlation (printed; only a generous sanity bound is asserted)."""

from __future__ import annotations

import pytest

from tests.hil.probe import chirp, shoot

pytestmark = pytest.mark.hil

MIN_SNR_DB = 15.0


async def test_burst_is_heard_above_the_floor_with_a_sane_latency(rig):
    from toy_runtime.adapters.sounddevice_io import SoundDeviceSink, SoundDeviceSource

    shot = await shoot(SoundDeviceSource(rig.mic, block_frames=1), SoundDeviceSink(rig.speaker, sample_rate_hz=16000),
                       chirp())
    print(f"\n[hil {rig.mode}] loopback: {shot}")

    assert shot.snr_db >= MIN_SNR_DB, f"burst not clearly above the floor: {shot}"
    assert shot.burst_dbfs > -60.0, f"burst too quiet to be the toy's own speaker: {shot}"
    assert shot.peak_ratio > 10, f"no clear correlation peak: {shot}"
    # The burst cannot be heard before it was written (a little slack for timestamp estimates), and a loop
    # slower than a second would make every turn feel broken.
    assert -20.0 < shot.latency_ms < 1000.0, shot
