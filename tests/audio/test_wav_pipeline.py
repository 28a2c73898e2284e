"""WAV file source → WebRTC VAD → endpointer → PocketSphinx: the demo's real capture path without a sound card."""

from __future__ import annotations

import numpy as np
import pytest

from toy_runtime.adapters.wav_io import WavFileSink, WavFileSource, read_wav, write_wav
from toy_runtime.audio.endpointer import EndpointerConfig
from toy_runtime.audio.listener import Listener, SpeechStart, Utterance

CFG = EndpointerConfig(preroll_ms=300, start_ms=60, hangover_ms=300, min_utterance_ms=200)


def gap(ms: int, rate: int = 22050, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).normal(0, 10, rate * ms // 1000).astype("<i2").tobytes()


async def listen(wav, sphinx, **listener_kw) -> tuple[list, WavFileSource, Listener]:
    """Every listener event for a WAV file (22050 Hz → 16 kHz frames, as fast as consumed), with the source and
    the listener."""
    from toy_runtime.adapters.webrtc_vad import WebRtcVad

    src = WavFileSource(wav, frame_ms=20)
    listener = Listener(src, WebRtcVad(2), sphinx, CFG, **listener_kw)
    await src.start()
    try:
        events = [e async for e in listener.events()]
    finally:
        await listener.aclose()
        await src.aclose()
    return events, src, listener


async def test_wav_file_through_the_listener_gives_the_right_transcripts(tmp_path, speak, sphinx):
    a, b = speak("what is the weather today"), speak("play some music")
    assert a.sample_rate_hz == b.sample_rate_hz == 22050
    wav = write_wav(tmp_path / "turns.wav", gap(700) + a.pcm + gap(1200, seed=1) + b.pcm + gap(800, seed=2), 22050)
    events, src, _ = await listen(wav, sphinx)
    utts = [e for e in events if isinstance(e, Utterance)]
    assert [u.text for u in utts] == ["what is the weather today", "play some music"]
    # WebRTC VAD may misfire on the first hiss before it has adapted: at most a discarded blip, never an utterance.
    starts = [e for e in events if isinstance(e, SpeechStart)]
    assert 2 <= len(starts) <= 3
    t0 = src._t0
    # Speech begins where the file has it (within the VAD's start window and piper's trimmed lead-in).
    assert abs((utts[0].started_at - t0) - 0.7) < 0.12
    assert abs((utts[0].ended_at - t0) - (0.7 + len(a.pcm) / 2 / 22050)) < 0.25
    assert utts[0].hangover_ms == pytest.approx(300)
    assert all(u.asr_final_at >= u.decided_at for u in utts)


async def transcripts(wav, sphinx, **listener_kw) -> tuple[list[str], Listener]:
    events, _, listener = await listen(wav, sphinx, **listener_kw)
    return [e.text for e in events if isinstance(e, Utterance)], listener


async def test_the_early_final_gives_the_right_words(tmp_path, speak, sphinx):
    phrases = ["what is the weather today", "play some music", "turn the volume up"]
    audio = gap(600)
    for i, phrase in enumerate(phrases):
        audio += speak(phrase).pcm + gap(900, seed=i + 1)
    wav = write_wav(tmp_path / "turns.wav", audio, 22050)
    early, listener = await transcripts(wav, sphinx, early_final_ms=100)
    assert early == phrases
    assert listener.early_finals == 3 and listener.early_final_replays == 0


async def test_a_pause_longer_than_the_early_final_is_heard_again_whole(tmp_path, speak, sphinx):
    # ~180 ms of quiet in the middle (piper's own ~120 ms tail + 60 ms): past the 100 ms early final, inside the
    # 300 ms hangover
    a, b = speak("what is the weather"), speak("today")
    wav = write_wav(tmp_path / "pause.wav", gap(600) + a.pcm + gap(60, seed=1) + b.pcm + gap(900, seed=2), 22050)
    texts, listener = await transcripts(wav, sphinx, early_final_ms=100)
    assert texts == ["what is the weather today"]
    assert listener.early_final_replays >= 1 and listener.early_finals == 1


async def test_wav_sink_writes_one_file_per_answer(tmp_path, speak):
    sink = WavFileSink(tmp_path / "out", prefix="turn1-")
    await sink.start()
    a = speak("play some music")
    fut = sink.first_sample("a1")
    await sink.play(a.pcm, a.sample_rate_hz, "a1")
    await sink.play(a.pcm[:4410], a.sample_rate_hz, "a1")
    await sink.play(a.pcm, a.sample_rate_hz, "a/2")
    assert fut.done() and fut.result() is not None
    await sink.drain()
    await sink.aclose()
    assert sorted(p.name for p in sink.files.values()) == ["turn1-a1.wav", "turn1-a_2.wav"]
    pcm, rate = read_wav(sink.files["a1"])
    assert rate == 22050 and pcm == a.pcm + a.pcm[:4410]


async def test_wav_source_realtime_and_stereo(tmp_path):
    stereo = np.zeros((1600, 2), dtype="<i2")
    stereo[:, 0] = 1000
    stereo[:, 1] = 3000
    path = tmp_path / "s.wav"
    import wave

    with wave.open(str(path), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(stereo.tobytes())
    src = WavFileSource(path, frame_ms=10, tail_silence_ms=20)
    await src.start()
    frames = [f async for f in src]
    assert len(frames) == 12  # 100 ms + 20 ms of tail, 10 ms frames
    assert np.frombuffer(frames[0].pcm, dtype="<i2")[0] == 2000  # channels averaged
    assert frames[1].timestamp_s - frames[0].timestamp_s == pytest.approx(0.01)
