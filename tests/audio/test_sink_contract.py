"""One AudioSink contract, run against the in-memory fake, the WAV sink and the real PortAudio sink (PulseAudio)."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from toy_runtime.fakes.audio import MemorySink, tone
from toy_runtime.ports.audio import AudioSink


def memory_sink(tmp_path):
    return MemorySink(22050, realtime=True)


def wav_sink(tmp_path):
    from toy_runtime.adapters.wav_io import WavFileSink

    return WavFileSink(tmp_path, sample_rate_hz=22050, realtime=True)


def pulse_sink(tmp_path):
    from toy_runtime.adapters.sounddevice_io import SoundDeviceSink

    return SoundDeviceSink("pulse", sample_rate_hz=22050)


SINKS = [
    pytest.param(memory_sink, id="memory"),
    pytest.param(wav_sink, id="wav"),
    pytest.param(pulse_sink, id="pulse", marks=pytest.mark.audio),
]


@pytest.fixture
def make_sink(request, tmp_path):
    """factory → sink; the PulseAudio variant first brings up the virtual sound card."""
    if "pulse" in request.node.callspec.id:
        request.getfixturevalue("sound_card")
    return lambda factory: factory(tmp_path)


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
@pytest.mark.parametrize("factory", SINKS)
async def test_answers_report_their_first_sample_in_order_and_drain_waits_for_the_audio(make_sink, factory):
    sink = make_sink(factory)
    assert isinstance(sink, AudioSink)
    await sink.start()
    try:
        first_a, first_b = sink.first_sample("a"), sink.first_sample("b")
        t0 = time.monotonic()
        await sink.play(tone(300, 22050), 22050, "a")
        await sink.play(tone(200, 16000), 16000, "b")  # another rate: resampled by the sink
        await sink.drain()
        elapsed = time.monotonic() - t0
        a, b = await first_a, await first_b
        assert a is not None and b is not None
        assert t0 <= a < b
        assert b - a >= 0.25  # b starts after a's 300 ms
        assert elapsed >= 0.45  # drain waited for ~500 ms of audio
        assert sink.first_sample("a") is first_a  # asking again gives the same future
    finally:
        await sink.aclose()


@pytest.mark.parametrize("factory", SINKS)
async def test_flush_drops_queued_audio_and_the_sink_stays_usable(make_sink, factory):
    sink = make_sink(factory)
    await sink.start()
    try:
        first_long, first_never = sink.first_sample("long"), sink.first_sample("never")
        # about 4 s of audio queued (what the sinks hold without blocking play()): a flush or drain that waited
        # for it would take nearly that long; the 2 s bounds leave a busy machine 1.5 s more than it needs
        await sink.play(tone(3000, 22050), 22050, "long")
        await sink.play(tone(1000, 22050), 22050, "never")
        await asyncio.wait_for(first_long, 30)
        t0 = time.monotonic()
        await sink.flush()
        assert time.monotonic() - t0 < 2.0
        assert await first_never is None  # flushed before a sample of it was written
        t1 = time.monotonic()
        await sink.drain()
        assert time.monotonic() - t1 < 2.0  # nothing left to play
        after = sink.first_sample("after")
        await sink.play(tone(100, 22050), 22050, "after")
        assert await asyncio.wait_for(after, 30) is not None
        await sink.drain()
    finally:
        await sink.aclose()


@pytest.mark.parametrize("factory", SINKS)
async def test_close_resolves_pending_answers_and_rejects_play(make_sink, factory):
    sink = make_sink(factory)
    await sink.start()
    pending = sink.first_sample("x")
    await sink.aclose()
    await sink.aclose()  # idempotent
    assert await pending is None
    with pytest.raises(RuntimeError):
        await sink.play(tone(10, 22050), 22050, "y")


@pytest.mark.audio
async def test_the_output_latency_setting_reaches_the_device(sound_card):
    """`[audio] output_latency_ms` is how much sound PortAudio keeps ahead on the device: 0 is its low default."""
    from toy_runtime.app.engines import build_speaker
    from toy_runtime.config import load_settings

    latencies = []
    for ms in (0, 40):
        env = {**os.environ, "TOY_AUDIO__OUTPUT_DEVICE": "pulse", "TOY_AUDIO__OUTPUT_LATENCY_MS": str(ms)}
        sink = build_speaker(load_settings(env=env))
        await sink.start()
        try:
            latencies.append(sink._stream.latency)
        finally:
            await sink.aclose()
    assert latencies[0] < 0.03 and latencies[1] == pytest.approx(0.04, abs=0.005)
