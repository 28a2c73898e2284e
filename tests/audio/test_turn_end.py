"""End-of-turn prediction: the classes of transcripts, the endpointer's held wait, and the listener ending a turn
by what the child said (a finished sentence at once, one that trails off only after a long pause)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor, Future

import pytest

from toy_runtime.audio.endpointer import Endpointer, EndpointerConfig, SpeechEnded
from toy_runtime.audio.listener import Listener, Utterance
from toy_runtime.audio.turn_end import TurnEndPolicy, classify
from toy_runtime.fakes.audio import ListSource, ScriptedASR, ScriptedVAD


@pytest.mark.parametrize("text", ["Turn it down.", "What time is it?", "Goodbye!", "Set the volume to 30.",
                                  "Remind me at 8:00.", "你叫什么名字?", "我饿了",
                                  "你会唱月亮的歌吗", "I do.", "Yes I can.", "I think so.", "I hope so!"])
def test_finished_sentences_are_complete(text):
    assert classify(text) == "complete"


@pytest.mark.parametrize("text", ["I want", "I want um", "and then", "Can you tell me?", "What do?", "Why do?",
                                  "Please make it.", "I drew a cat and", "the big...", "I like,", "我想听", "然后",
                                  "给我讲一个", "下雪的时候", "你能告诉我?", "我觉得", "我画了一只猫然后", "我觉得很"])
def test_sentences_that_trail_off_are_unfinished(text):
    assert classify(text) == "unfinished"


@pytest.mark.parametrize("text", ["", "  ", "turn it down", "声音小一点", "再见", "明天早上八点提醒我"])
def test_no_telling_sign_is_unsure(text):
    assert classify(text) == "unsure"


def test_the_policy_maps_classes_to_waits_and_refuses_a_disorder():
    policy = TurnEndPolicy(complete_ms=60, hangover_ms=300, unfinished_ms=1200)
    assert [policy.wait_ms(t) for t in ("Tell me a story.", "再见", "I want")] == [60, 300, 1200]
    with pytest.raises(ValueError):
        TurnEndPolicy(complete_ms=400, hangover_ms=300, unfinished_ms=1200)


def _endpoint(hold_ms: float | None, *, resume: bool = False) -> float:
    """Speech 0-500 ms, silence after (or a second burst 700-800 ms); hold(hold_ms) at 540 ms: the end's at_ms."""
    ep: Endpointer[int] = Endpointer(EndpointerConfig(hangover_ms=300, preroll_ms=0, level_end=False))
    for i in range(150):
        t = i * 10
        speech = t < 500 or (resume and 700 <= t < 800)
        if t == 540 and hold_ms is not None:
            ep.hold(hold_ms)
        for event in ep.process(i, speech, 10.0):
            if isinstance(event, SpeechEnded):
                return event.at_ms
    raise AssertionError("no end")


def test_a_held_wait_replaces_the_hangover_for_this_silence_only():
    assert _endpoint(None) == 800  # 500 + 300
    assert _endpoint(60) == 560  # the hold applies from the speech end: 500 + 60 (already passed at 540: next frame)
    assert _endpoint(1000) == 1500
    # speech resumed: the hold is gone and the configured hangover counts from the new end
    assert _endpoint(1000, resume=True) == 1100


class InlineExecutor(Executor):
    """Runs each recognizer call as it is submitted: the early final is in before the next frame, every time."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - handed to the listener, as a worker thread would
            future.set_exception(exc)
        return future


async def _turn(transcripts: list[str], pause_ms: int, *, policy: TurnEndPolicy | None) -> list[Utterance]:
    """Speech 600 ms, a pause, speech 400 ms: the utterances the listener makes; the recognizer's finals in turn
    are `transcripts` (the first is the early final of the first part)."""
    asr = ScriptedASR(transcripts)
    src = ListSource.from_segments((("silence", 300), ("speech", 600), ("silence", pause_ms), ("speech", 400),
                                    ("silence", 2000)), clock=lambda: 100.0)
    cfg = EndpointerConfig(preroll_ms=200, start_ms=60, hangover_ms=300, min_utterance_ms=200, level_end=False)
    listener = Listener(src, ScriptedVAD(), asr, cfg, early_final_ms=40, turn_end=policy, executor=InlineExecutor())
    await src.start()
    return [e async for e in listener.events() if isinstance(e, Utterance)]


POLICY = TurnEndPolicy(complete_ms=60, hangover_ms=300, unfinished_ms=1200)


async def test_a_finished_sentence_ends_the_turn_as_soon_as_its_transcript_is_in():
    [first, second] = await _turn(["Tell me a story.", "more words."], 700, policy=POLICY)
    assert first.text == "Tell me a story." and first.turn_end == "complete"
    assert first.hangover_ms == pytest.approx(60)  # not the 300 ms hangover
    assert second.text == "more words."


async def test_a_sentence_that_trails_off_waits_through_a_long_pause():
    [whole] = await _turn(["I want", "I want more words."], 900, policy=POLICY)  # 900 ms: the fixed hangover would cut it
    assert whole.text == "I want more words."  # one turn: the early text was dropped, the whole heard again
    [first, _] = await _turn(["I want", "more words."], 900, policy=None)
    assert first.text == "I want" and first.turn_end == "fixed"


async def test_an_unsure_transcript_keeps_the_fixed_hangover():
    [first, _] = await _turn(["turn it down", "more words."], 700, policy=POLICY)
    assert first.turn_end == "unsure" and first.hangover_ms == pytest.approx(300)


class SlowFinishExecutor(InlineExecutor):
    """Like InlineExecutor, but the recognizer's finish() only returns when `release()` is called (a busy CPU)."""

    def __init__(self) -> None:
        self.held: list[tuple[object, Future]] = []

    def submit(self, fn, /, *args, **kwargs) -> Future:
        if getattr(fn, "__name__", "") != "finish":
            return super().submit(fn, *args, **kwargs)
        future: Future = Future()
        self.held.append((fn, future))
        return future

    def release(self) -> None:
        for fn, future in self.held:
            future.set_result(fn())
        self.held.clear()


class ReleaseAt(ListSource):
    """Hands out `inner`'s frames and releases the slow recognizer before frame `at` (1-based)."""

    def __init__(self, inner: ListSource, executor: SlowFinishExecutor, at: int) -> None:
        self._inner, self._executor, self._at, self._n = inner, executor, at, 0

    async def start(self) -> None:
        await self._inner.start()

    def __aiter__(self):
        return self

    async def __anext__(self):
        frame = await self._inner.__anext__()
        self._n += 1
        if self._n >= self._at:
            self._executor.release()
        return frame


async def test_a_slow_transcript_holds_the_turn_open_instead_of_letting_the_fixed_hangover_cut_it():
    """The early final takes 600 ms (a busy machine): the 300 ms hangover must not end "can you tell me" in the
    pause before the transcript has said it trails off."""
    executor = SlowFinishExecutor()
    inner = ListSource.from_segments((("silence", 300), ("speech", 600), ("silence", 900), ("speech", 400),
                                      ("silence", 2000)), clock=lambda: 100.0)
    # 20 ms frames: speech ends at frame 45, the early final goes out at frame 47, comes back at frame 77
    src = ReleaseAt(inner, executor, at=77)
    asr = ScriptedASR(["Can you tell me?", "Can you tell me why the sky is blue?"])
    cfg = EndpointerConfig(preroll_ms=200, start_ms=60, hangover_ms=300, min_utterance_ms=200, level_end=False)
    listener = Listener(src, ScriptedVAD(), asr, cfg, early_final_ms=40, turn_end=POLICY, executor=executor)
    await src.start()
    # liveness only: a listener that ended the turn early waits for the held transcript, and frames stop coming
    asyncio.get_running_loop().call_later(2.0, executor.release)
    utterances = [e async for e in listener.events() if isinstance(e, Utterance)]
    assert [u.text for u in utterances] == ["Can you tell me why the sky is blue?"]


def _endpoint_with_levels(hold_ms: float, *, loud_again: bool) -> tuple[float, bool]:
    """The room at −70 dBFS for 200 ms, speech at −20 dBFS 200–700 ms, then 400 ms that the VAD still calls speech
    at the room's level (its overhang, or a room it takes for speech), then the room (or, `loud_again`, speech
    again at 1300–1400 ms); hold(hold_ms) at 740 ms. The end's at_ms, and whether the endpointer saw speech come
    back after the end it held from."""
    ep: Endpointer[int] = Endpointer(EndpointerConfig(hangover_ms=300, preroll_ms=0, min_utterance_ms=0))
    held_from, resumed = None, False
    for i in range(300):
        t = i * 10
        loud = 200 <= t < 700 or (loud_again and 1300 <= t < 1400)
        vad = loud or 700 <= t < 1100
        if t == 740:
            ep.hold(hold_ms)
            held_from = ep.speech_end_ms
        if held_from is not None and ep.in_speech:
            resumed = resumed or ep.resumed_after(held_from)
        for event in ep.process(i, vad, 10.0, -20.0 if loud else -70.0):
            if isinstance(event, SpeechEnded):
                return event.at_ms, resumed
    raise AssertionError("no end")


def test_a_held_wait_outlasts_the_vads_quiet_overhang_and_speech_at_speaking_level_releases_it():
    """Live, a VAD overhang at the room's level crept the end of speech forward frame by frame; each step used to
    count as speech resuming: the held wait was dropped for the fixed hangover, and the listener replayed and
    decoded the utterance again on every frame."""
    end, resumed = _endpoint_with_levels(1200, loud_again=False)
    assert not resumed
    # the end crept to 1100 − 150 (the level credit): the held 1,200 ms counts from there, not a 300 ms hangover
    assert end == pytest.approx(950 + 1200)
    end, resumed = _endpoint_with_levels(1200, loud_again=True)
    assert resumed and end == pytest.approx(1400 + 300)  # the child went on: the configured hangover again
