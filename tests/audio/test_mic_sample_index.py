"""The microphone numbers its frames by sample, counting the audio lost before it reached us, so the echo
canceller's reference can skip exactly that much (audio/echo_reference.py)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from toy_runtime.adapters.sounddevice_mic import SoundDeviceSource

RATE = 16000
BLOCK = 320  # one 20 ms frame per callback


def callback(mic: SoundDeviceSource, adc: float, *, overflow: bool = False) -> None:
    status = SimpleNamespace(input_overflow=overflow)
    timing = SimpleNamespace(inputBufferAdcTime=adc, currentTime=adc + 0.03)
    mic._callback(b"\x01\x00" * BLOCK, BLOCK, timing, status)  # the PortAudio thread's call, made here


async def test_frames_count_samples_and_a_device_overflow_adds_what_it_lost():
    mic = SoundDeviceSource(sample_rate_hz=RATE, frame_ms=20, queue_frames=100)
    mic.device_rate_hz = RATE
    mic._loop = asyncio.get_running_loop()
    callback(mic, 10.00)
    callback(mic, 10.02)
    callback(mic, 10.10, overflow=True)  # 60 ms the device never handed over
    callback(mic, 10.12)
    await asyncio.sleep(0)  # the frames reach the queue on the loop
    frames = [mic._queue.get_nowait() for _ in range(4)]
    assert [f.first_sample for f in frames] == [0, 320, 1600, 1920]
    assert mic.xruns == 1


async def test_a_frame_the_queue_drops_leaves_its_gap_in_the_index():
    mic = SoundDeviceSource(sample_rate_hz=RATE, frame_ms=20, queue_frames=2)
    mic.device_rate_hz = RATE
    mic._loop = asyncio.get_running_loop()
    for k in range(3):
        callback(mic, 10.0 + 0.02 * k)
    await asyncio.sleep(0)
    frames = [mic._queue.get_nowait() for _ in range(2)]
    assert [f.first_sample for f in frames] == [320, 640] and mic.overflows == 1
