"""The listener through the in-package fakes: what reaches the ASR, when, and how pause/resume behave."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from toy_runtime.audio.endpointer import EndpointerConfig
from toy_runtime.audio.listener import (
    Listener,
    ListeningTimeout,
    PartialTranscript,
    SpeechStart,
    Utterance,
    UtteranceDiscarded,
)
from toy_runtime.audio.wrapped_source import WrappedSource
from toy_runtime.fakes.audio import ListSource, ScriptedASR, ScriptedVAD
from toy_runtime.ports.audio import AudioFrame
from toy_runtime.ports.speech import SpeechEngineError

CFG = EndpointerConfig(preroll_ms=200, start_ms=60, hangover_ms=200, min_utterance_ms=200, max_utterance_ms=10000)


def source(*segments, **kw) -> ListSource:
    return ListSource.from_segments(segments, clock=lambda: 100.0, **kw)


async def collect(listener: Listener, src: ListSource) -> list:
    await src.start()
    return [e async for e in listener.events()]


async def test_two_utterances_only_speech_reaches_the_asr():
    src = source(("silence", 1000), ("speech", 600), ("silence", 1000), ("speech", 400), ("silence", 500))
    asr = ScriptedASR(["turn it up", "thank you"])
    vad = ScriptedVAD()
    listener = Listener(src, vad, asr, CFG)
    try:
        events = await collect(listener, src)
    finally:
        await listener.aclose()
    utts = [e for e in events if isinstance(e, Utterance)]
    assert [u.text for u in utts] == ["turn it up", "thank you"]
    assert [type(e) for e in events] == [SpeechStart, Utterance, SpeechStart, Utterance]
    first, second = utts
    assert first.started_at == pytest.approx(101.0)
    assert first.ended_at == pytest.approx(101.6)  # VAD end of speech
    assert first.endpoint_at == pytest.approx(101.8)  # + 200 ms hangover
    assert first.hangover_ms == pytest.approx(200)
    assert first.reason == "hangover"
    assert second.started_at == pytest.approx(102.6)
    # pre-roll (200) + speech + hangover (200): nothing of the idle silence was fed to the ASR
    assert asr.utterance_ms == pytest.approx([1000.0, 800.0])
    assert first.audio_ms == pytest.approx(1000.0)
    assert asr.total_fed_ms == pytest.approx(1800.0)
    assert vad.calls == src.frames_delivered == 175  # 3.5 s of 20 ms frames, every one checked by the VAD
    assert first.asr_final_at >= first.decided_at


async def test_too_short_is_discarded_and_the_asr_reset():
    src = source(("silence", 300), ("speech", 100), ("silence", 600))
    asr = ScriptedASR(["never"])
    listener = Listener(src, ScriptedVAD(), asr, CFG)
    events = await collect(listener, src)
    await listener.aclose()
    assert [type(e) for e in events] == [SpeechStart, UtteranceDiscarded]
    assert events[1] == UtteranceDiscarded("too_short", pytest.approx(100.0))
    assert asr.resets == 1 and asr.utterance_ms == []


async def test_paused_listener_hears_nothing_and_resume_starts_clean():
    src = source(("speech", 600), ("silence", 400), ("speech", 600), ("silence", 400))
    asr = ScriptedASR(["second"])
    vad = ScriptedVAD()
    listener = Listener(src, vad, asr, CFG)
    listener.pause()
    await src.start()
    events = [e async for e in listener.events()]
    await listener.aclose()
    assert events == []  # deaf throughout
    assert vad.calls == 0  # paused listening does not even run the VAD
    assert asr.starts == 0


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_pause_mid_utterance_discards_it_and_resume_hears_the_next():
    # real-time paced so a resume can happen "later", during the silence between the two utterances
    src = ListSource.from_segments(
        [("speech", 300), ("silence", 300), ("speech", 400), ("silence", 300)], realtime=True
    )
    asr = ScriptedASR(["second"])
    listener = Listener(src, ScriptedVAD(), asr, CFG)

    async def resume_in_the_gap() -> None:
        while src.frames_delivered < 20:  # 400 ms: inside the first silence
            await asyncio.sleep(0.005)
        listener.resume()

    await src.start()
    events = []
    resumer = None
    try:
        async for event in listener.events():
            events.append(event)
            if isinstance(event, SpeechStart) and len(events) == 1:
                listener.pause()
                resumer = asyncio.create_task(resume_in_the_gap(), name="test-resume")
    finally:
        if resumer is not None:
            await resumer
        await listener.aclose()
    assert [type(e) for e in events] == [SpeechStart, UtteranceDiscarded, SpeechStart, Utterance]
    assert events[1].reason == "paused"
    assert events[3].text == "second"
    # the second utterance, not the tail of the first
    assert events[2].at - events[0].at == pytest.approx(0.6, abs=0.001)
    assert asr.resets == 1


async def test_no_speech_timeout_is_reported():
    cfg = EndpointerConfig(no_speech_timeout_ms=500)
    src = source(("silence", 1200))
    listener = Listener(src, ScriptedVAD(), ScriptedASR(), cfg)
    events = await collect(listener, src)
    await listener.aclose()
    assert events == [ListeningTimeout(waited_ms=500, at=pytest.approx(100.5))]


async def test_partials_stream_while_speaking():
    src = source(("speech", 1000), ("silence", 400))
    asr = ScriptedASR(["one two three four"], partial_every_ms=200)
    listener = Listener(src, ScriptedVAD(), asr, CFG)
    events = await collect(listener, src)
    await listener.aclose()
    partials = [e.text for e in events if isinstance(e, PartialTranscript)]
    assert partials and partials[0] == "one"
    assert all(b.startswith(a) for a, b in zip(partials, partials[1:]))
    assert isinstance(events[-1], Utterance) and events[-1].text == "one two three four"


class ExplodingASR(ScriptedASR):
    def accept(self, pcm: bytes):
        raise OSError("decoder crashed")


async def test_asr_failure_surfaces_as_speech_engine_error():
    src = source(("speech", 600), ("silence", 400))
    listener = Listener(src, ScriptedVAD(), ExplodingASR(), CFG)
    await src.start()
    with pytest.raises(SpeechEngineError) as info:
        async for _ in listener.events():
            pass
    await listener.aclose()
    assert info.value.code == "asr-failed"
    assert isinstance(info.value.__cause__, OSError)


async def test_realtime_source_paces_frames():
    src = ListSource.from_segments([("silence", 200)], realtime=True)
    listener = Listener(src, ScriptedVAD(), ScriptedASR(), CFG)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await collect(listener, src)
    await listener.aclose()
    assert loop.time() - t0 >= 0.19  # ten 20 ms frames cannot arrive faster than they were "captured"


async def test_pause_and_resume_between_two_frames_still_discards_the_open_utterance():
    # 100 ms: after the pause at 60 ms, the 40 ms left of it are too short to reopen speech
    src = source(("speech", 100), ("silence", 400), ("speech", 400), ("silence", 400))
    asr = ScriptedASR(["only the second"])
    listener = Listener(src, ScriptedVAD(), asr, CFG)
    await src.start()
    events = []
    async for event in listener.events():
        events.append(event)
        if isinstance(event, SpeechStart) and len(events) == 1:
            listener.pause()
            listener.resume()
    await listener.aclose()
    assert [type(e) for e in events] == [SpeechStart, UtteranceDiscarded, SpeechStart, Utterance]
    assert events[-1].text == "only the second" and len(asr.utterance_ms) == 1


async def test_the_end_of_speech_is_the_last_loud_frame_not_the_vads_overhang():
    from toy_runtime.fakes.audio import silence, tone

    # speech at about -15 dBFS for 600 ms, then 100 ms of a -72 dBFS tail that this VAD (threshold 5) still calls
    # speech, as the WebRTC VAD does with piper's fading tails
    pcm = silence(1000) + tone(600) + tone(100, amplitude=8) + silence(600)
    for level_end, ended in ((True, 101.6), (False, 101.7)):
        src = ListSource(pcm, clock=lambda: 100.0)
        cfg = EndpointerConfig(**{**CFG.__dict__, "level_end": level_end})
        listener = Listener(src, ScriptedVAD(threshold=5.0), ScriptedASR(["hello there"]), cfg)
        try:
            utts = [e for e in await collect(listener, src) if isinstance(e, Utterance)]
        finally:
            await listener.aclose()
        assert len(utts) == 1
        assert utts[0].ended_at == pytest.approx(ended)
        assert utts[0].endpoint_at == pytest.approx(ended + 0.2)  # the hangover counts from that end


async def test_a_live_source_gives_the_capture_lag_and_the_end_of_speech_on_the_listener_clock():
    for live, lag in ((True, 0.035), (False, 0.0)):
        src = source(("silence", 1000), ("speech", 600), ("silence", 400))
        # the listener's clock: 35 ms after the closing frame was captured (101.6 + 0.2 hangover)
        listener = Listener(src, ScriptedVAD(), ScriptedASR(["hi"]), CFG, clock=lambda: 101.835, live_source=live)
        try:
            (utt,) = [e for e in await collect(listener, src) if isinstance(e, Utterance)]
        finally:
            await listener.aclose()
        assert utt.capture_lag_s == pytest.approx(lag)
        # decided − capture lag − hangover: on a live clock exactly the end of speech as captured
        assert utt.end_of_speech_clock == pytest.approx(101.835 - lag - 0.2)


# early final: the recognizer is finished during the hangover, the transcript is ready at the endpoint

async def run_listener(segments, transcripts, **kw):
    src = source(*segments)
    asr = ScriptedASR(transcripts)
    listener = Listener(src, ScriptedVAD(), asr, CFG, **kw)
    try:
        events = await collect(listener, src)
    finally:
        await listener.aclose()
    return events, asr, listener


async def test_early_final_hears_only_the_first_part_of_the_hangover_and_times_the_utterance_the_same():
    segments = (("silence", 500), ("speech", 600), ("silence", 800))
    early, asr, listener = await run_listener(segments, ["turn it up"], early_final_ms=100)
    late, late_asr, late_listener = await run_listener(segments, ["turn it up"])
    [u] = [e for e in early if isinstance(e, Utterance)]
    [v] = [e for e in late if isinstance(e, Utterance)]
    assert u.text == v.text == "turn it up"
    assert asr.utterance_ms == pytest.approx([200 + 600 + 100])  # pre-roll, speech, 100 ms of the tail
    assert late_asr.utterance_ms == pytest.approx([200 + 600 + 200])  # the whole hangover
    assert listener.early_finals == 1 and listener.early_final_replays == 0
    assert late_listener.early_finals == 0
    # the endpoint is where it was: the early final changes when the transcript is ready, not the turn's timing
    assert (u.started_at, u.ended_at, u.endpoint_at, u.audio_ms) == pytest.approx(
        (v.started_at, v.ended_at, v.endpoint_at, v.audio_ms))


async def test_speech_resuming_after_an_early_final_replays_the_whole_utterance():
    # a 160 ms pause: longer than the early final's 100 ms, shorter than the 200 ms hangover
    segments = (("silence", 500), ("speech", 600), ("silence", 160), ("speech", 400), ("silence", 800))
    events, asr, listener = await run_listener(segments, ["remind me to", "remind me to water the plants"],
                                               early_final_ms=100)
    utts = [e for e in events if isinstance(e, Utterance)]
    assert [u.text for u in utts] == ["remind me to water the plants"]  # the early text was dropped
    assert listener.early_final_replays == 1 and listener.early_finals == 1
    # the second pass heard everything: pre-roll, speech, the whole pause, speech, 100 ms of the tail
    assert asr.utterance_ms == pytest.approx([200 + 600 + 100, 200 + 600 + 160 + 400 + 100])
    assert asr.starts == 2


async def test_the_vads_quiet_overhang_after_an_early_final_is_not_speech_resuming():
    """Live, after an early final the VAD went on calling the quiet room speech; each such frame crept the end of
    speech forward and was taken for the child going on: the utterance was replayed and decoded again on every
    frame (~0.2 s of the recognizer's thread each), and the listener fell seconds behind the mic. Only a frame at
    speaking level is the child going on."""
    from toy_runtime.fakes.audio import silence, tone

    quiet = (np.random.default_rng(0).normal(0, 30, 16 * 600)).astype("<i2").tobytes()  # ~-61 dBFS: VAD "speech"
    for again in (False, True):
        pcm = silence(500) + tone(600) + quiet + (tone(400) if again else b"") + silence(800)
        asr = ScriptedASR(["turn it up", "turn it up now"])
        listener = Listener(ListSource(pcm, clock=lambda: 100.0), ScriptedVAD(threshold=5.0), asr, CFG,
                            early_final_ms=100)
        src = listener._source
        try:
            utts = [e for e in await collect(listener, src) if isinstance(e, Utterance)]
        finally:
            await listener.aclose()
        assert [u.text for u in utts] == (["turn it up now"] if again else ["turn it up"])
        assert listener.early_final_replays == (1 if again else 0) and asr.starts == (2 if again else 1)


async def test_a_click_finished_early_is_still_discarded_and_the_next_utterance_is_whole():
    segments = (("silence", 500), ("speech", 100), ("silence", 600), ("speech", 600), ("silence", 600))
    events, asr, listener = await run_listener(segments, ["click", "hello there"], early_final_ms=100)
    assert [type(e) for e in events] == [SpeechStart, UtteranceDiscarded, SpeechStart, Utterance]
    assert events[-1].text == "hello there"


async def test_pausing_after_an_early_final_discards_the_utterance():
    # frames of 20 ms: speech ends at frame 45, the early final comes at 100 ms of silence (frame 50), the hangover
    # would end at frame 55; the listener goes deaf at frame 52 and hears again from frame 70
    src = source(("silence", 300), ("speech", 600), ("silence", 1000), ("speech", 600), ("silence", 600))
    asr = ScriptedASR(["dropped", "the next one"])
    listener = Listener(FrameHook(src, {52: lambda: listener.pause(), 70: lambda: listener.resume()}),
                        ScriptedVAD(), asr, CFG, early_final_ms=100)
    events = await collect(listener, src)
    await listener.aclose()
    assert [type(e) for e in events] == [SpeechStart, UtteranceDiscarded, SpeechStart, Utterance]
    assert events[-1].text == "the next one"
    assert listener.early_finals == 1  # the second utterance's; the first one's was dropped with it


class FrameHook:
    """A source wrapper that runs a callback just before handing out the n-th frame (1-based)."""

    def __init__(self, inner: ListSource, hooks: dict) -> None:
        self._inner, self._hooks, self._n = inner, hooks, 0

    def __aiter__(self):
        return self

    async def __anext__(self):
        frame = await self._inner.__anext__()
        self._n += 1
        if self._n in self._hooks:
            self._hooks[self._n]()
        return frame


@pytest.mark.parametrize("early_final_ms", [0, 200, 500])
async def test_early_final_at_or_beyond_the_hangover_is_off(early_final_ms):
    events, asr, listener = await run_listener((("silence", 500), ("speech", 600), ("silence", 800)), ["hi"],
                                               early_final_ms=early_final_ms)
    assert [e.text for e in events if isinstance(e, Utterance)] == ["hi"]
    assert listener.early_finals == 0 and asr.utterance_ms == pytest.approx([1000.0])


class RelaxRecordingSource(ListSource):
    """A ListSource that can group its frames (ports.audio.RelaxableSource) and records when it was asked to."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.relax_calls: list[tuple[int, bool]] = []  # (frames delivered so far, relaxed)

    def relax_delivery(self, relaxed: bool) -> None:
        self.relax_calls.append((self.frames_delivered, relaxed))


async def test_the_source_groups_frames_only_while_nothing_is_heard():
    """Relaxed while silent, every frame at once from the first speech frame to the endpoint, relaxed again after;
    and relaxed while paused."""
    src = RelaxRecordingSource.from_segments([("silence", 1000), ("speech", 600), ("silence", 1000)],
                                             clock=lambda: 100.0)
    listener = Listener(src, ScriptedVAD(), ScriptedASR(["hello"]), CFG)
    events = await collect(listener, src)
    await listener.aclose()
    assert [type(e) for e in events] == [SpeechStart, Utterance]
    # frame 51 is the first speech frame; 30 speech frames + a 200 ms hangover (10 frames) end at frame 90
    assert src.relax_calls == [(1, True), (51, False), (90, True)]

    paused = RelaxRecordingSource.from_segments([("speech", 400)], clock=lambda: 100.0)
    deaf = Listener(paused, ScriptedVAD(), ScriptedASR([]), CFG)
    deaf.pause()
    assert await collect(deaf, paused) == []
    await deaf.aclose()
    assert paused.relax_calls == [(1, True)]  # speech, but deaf: no frame is needed at once


class RecordingASR(ScriptedASR):
    """Keeps every byte it was fed."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.fed = bytearray()

    def accept(self, pcm: bytes):
        self.fed += pcm
        return super().accept(pcm)


class TwoVersionSource(WrappedSource):
    """Each frame of the wrapped source with a recognizer's copy beside it: the same length, every sample 7."""

    def _frame(self, frame: AudioFrame) -> AudioFrame:
        marked = np.full(len(frame.pcm) // 2, 7, np.int16).tobytes()
        return AudioFrame(frame.pcm, frame.sample_rate_hz, frame.timestamp_s, marked)


async def test_the_recognizer_gets_the_frames_recognizer_copy_and_the_vad_the_other():
    src = TwoVersionSource(source(("silence", 500), ("speech", 600), ("silence", 800)))
    asr = RecordingASR(["turn it up"])
    listener = Listener(src, ScriptedVAD(), asr, CFG, early_final_ms=100)
    try:
        await src.start()
        events = [e async for e in listener.events()]
    finally:
        await listener.aclose()
    assert [e.text for e in events if isinstance(e, Utterance)] == ["turn it up"]  # the VAD heard the tone
    assert asr.fed and set(np.frombuffer(bytes(asr.fed), np.int16)) == {7}  # the recognizer only the copy
