"""Contract tests for the AudioSource and SpeechRecognizer ports, run against the fakes and the real adapters."""

from __future__ import annotations

import asyncio

import pytest

from toy_runtime.fakes.audio import ListSource, ScriptedASR, silence
from toy_runtime.ports.audio import AudioSource
from toy_runtime.ports.speech import SpeechRecognizer

# -- AudioSource ---------------------------------------------------------------------------------------------


def list_source(tmp_path):
    return ListSource(silence(2000), realtime=True)


def wav_source(tmp_path):
    from toy_runtime.adapters.wav_io import WavFileSource, write_wav

    return WavFileSource(write_wav(tmp_path / "s.wav", silence(2000, 22050), 22050), realtime=True)


def pulse_source(tmp_path):
    from toy_runtime.adapters.sounddevice_io import SoundDeviceSource

    return SoundDeviceSource("pulse")


SOURCES = [
    pytest.param(list_source, id="list"),
    pytest.param(wav_source, id="wav"),
    pytest.param(pulse_source, id="pulse", marks=pytest.mark.audio),
]


@pytest.mark.parametrize("factory", SOURCES)
async def test_source_delivers_timed_16k_frames_until_closed(request, tmp_path, factory):
    if "pulse" in request.node.callspec.id:
        request.getfixturevalue("sound_card")
    source = factory(tmp_path)
    assert isinstance(source, AudioSource)
    await source.start()
    frames = []
    try:
        for _ in range(10):
            frames.append(await asyncio.wait_for(source.__anext__(), 2))
    finally:
        await source.aclose()
    assert all(f.sample_rate_hz == 16000 and f.duration_ms == source.frame_ms == 20 for f in frames)
    steps = [b.timestamp_s - a.timestamp_s for a, b in zip(frames, frames[1:])]
    # consecutive 20 ms frames: in order, 20 ms apart on average (one late PortAudio callback on a busy machine
    # shifts a single timestamp, not the spacing of the run)
    assert all(s > 0 for s in steps), steps
    assert 0.015 < sum(steps) / len(steps) < 0.025, steps
    rest = [f async for f in source]  # ends after close (at most what was already queued)
    assert len(rest) < 100
    assert source.overflows == 0
    await source.aclose()  # idempotent


# -- SpeechRecognizer ------------------------------------------------------------------------------------


@pytest.fixture(params=["scripted", pytest.param("whisper", marks=pytest.mark.models),
                        pytest.param("pocketsphinx", marks=pytest.mark.models),
                        pytest.param("vosk", marks=pytest.mark.models)])
def recognizer(request) -> SpeechRecognizer:
    if request.param == "scripted":
        return ScriptedASR(["x"] * 10)
    return request.getfixturevalue({"whisper": "whisper", "pocketsphinx": "sphinx",
                                    "vosk": "vosk_ko"}[request.param])


def test_recognizer_contract(recognizer):
    assert isinstance(recognizer, SpeechRecognizer)
    assert recognizer.sample_rate_hz == 16000
    assert recognizer.finish() == ""  # nothing open: empty, not an error
    recognizer.start_utterance()
    result = recognizer.accept(silence(200))
    assert result is None or isinstance(result, str)
    recognizer.reset()
    assert recognizer.finish() == ""  # the abandoned utterance is gone
    recognizer.accept(silence(100))  # accept() opens an utterance if none is
    assert isinstance(recognizer.finish(), str)
    recognizer.start_utterance()
    recognizer.start_utterance()  # a second start abandons the first
    assert isinstance(recognizer.finish(), str)
