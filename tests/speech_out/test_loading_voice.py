"""LoadingSynthesizer: the voice loop can start listening while the voice is still loading."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest

from toy_runtime.speech_out.loading_voice import LoadingSynthesizer
from toy_runtime.fakes.audio import ToneTTS
from toy_runtime.fakes.clock import ManualClock
from toy_runtime.ports.speech import SpeechEngineError, SpeechSynthesizer


class WatchedClock(ManualClock):
    """A manual clock that says when it was first read: LoadingSynthesizer reads it as it starts to wait."""

    def __init__(self) -> None:
        super().__init__(datetime(2026, 1, 1, tzinfo=timezone.utc), monotonic=100.0)
        self.read = asyncio.Event()

    def monotonic(self) -> float:
        self.read.set()
        return super().monotonic()


class ClosableTTS(ToneTTS):
    closed = False

    def close(self) -> None:
        self.closed = True


async def pieces(synth, text: str) -> list[str]:
    return [p.text async for p in synth.synthesize(text)]


async def test_a_call_before_the_voice_is_loaded_waits_and_reports_the_wait():
    loaded: asyncio.Future = asyncio.get_running_loop().create_future()
    waits: list[float] = []
    clock = WatchedClock()
    synth = LoadingSynthesizer(loaded, expected_rate_hz=22050, on_wait=waits.append, clock=clock.monotonic)
    assert isinstance(synth, SpeechSynthesizer) and synth.engine is None and synth.sample_rate_hz == 22050
    speaking = asyncio.create_task(pieces(synth, "Hello there. How are you?"))
    await asyncio.wait_for(clock.read.wait(), 10)  # it started waiting for the voice
    await asyncio.sleep(0)
    assert not speaking.done()  # nothing is skipped: it waits
    clock.advance(0.25)
    engine = ToneTTS(sample_rate_hz=16000, ms_per_char=1.0)
    loaded.set_result(engine)
    assert await speaking == ["Hello there.", "How are you?"]
    assert waits == [250.0]
    assert synth.engine is engine and synth.sample_rate_hz == 16000
    assert await pieces(synth, "Again.") == ["Again."] and len(waits) == 1  # loaded: no more waiting


async def test_a_failed_load_is_a_speech_engine_error_for_every_call():
    loaded: asyncio.Future = asyncio.get_running_loop().create_future()
    synth = LoadingSynthesizer(loaded)
    loaded.set_exception(OSError("voice.onnx: truncated file"))
    for _ in range(2):
        with pytest.raises(SpeechEngineError) as error:
            await pieces(synth, "Hi.")
        assert error.value.code == "tts-model-failed" and "truncated" in str(error.value)
    with pytest.raises(RuntimeError):
        synth.sample_rate_hz  # noqa: B018 - no expected rate, no engine


async def test_cancelling_a_waiting_turn_does_not_cancel_the_load():
    loaded: asyncio.Future = asyncio.get_running_loop().create_future()
    synth = LoadingSynthesizer(loaded)
    turn = asyncio.create_task(pieces(synth, "Hi."))
    await asyncio.sleep(0.05)
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    assert not loaded.cancelled()
    loaded.set_result(ToneTTS(ms_per_char=1.0))
    assert await pieces(synth, "Still here.") == ["Still here."]


async def test_a_turn_cancelled_as_the_voice_arrives_stays_cancelled():
    """The engine and the cancellation land in the same loop iteration: the turn must still stop (a swallowed
    cancellation would leave the speaker waiting for ever after a barge-in)."""
    loaded: asyncio.Future = asyncio.get_running_loop().create_future()
    synth = LoadingSynthesizer(loaded)
    turn = asyncio.create_task(pieces(synth, "Hi."))
    await asyncio.sleep(0.05)
    loaded.set_result(ToneTTS(ms_per_char=1.0))
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn


async def test_a_cancelled_load_is_a_speech_engine_error_for_waiting_turns():
    loaded: asyncio.Future = asyncio.get_running_loop().create_future()
    synth = LoadingSynthesizer(loaded)
    turn = asyncio.create_task(pieces(synth, "Hi."))
    await asyncio.sleep(0.05)
    loaded.cancel()
    with pytest.raises(SpeechEngineError, match="cancelled"):
        await turn


async def test_close_before_the_load_finishes_closes_the_engine_when_it_arrives():
    loaded: asyncio.Future = asyncio.get_running_loop().create_future()
    synth = LoadingSynthesizer(loaded)
    synth.close()
    engine = ClosableTTS()
    loaded.set_result(engine)
    await asyncio.sleep(0)
    assert engine.closed


async def test_a_voice_loop_turn_waits_for_a_late_voice_and_is_spoken(tmp_path):
    from tests.voice.test_voice_loop import Rig, utterance
    from toy_runtime.session.voice_loop import Stop
    from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer

    with ScriptedLLMServer([Reply(text="I am here now.")]) as llm:
        rig = Rig(tmp_path, llm.url)
        loaded: asyncio.Future = asyncio.get_running_loop().create_future()
        clock = WatchedClock()
        rig.loop.synthesizer = LoadingSynthesizer(loaded, on_wait=lambda ms: rig.audit.record("waited", ms=ms),
                                                  clock=clock.monotonic)
        turned = asyncio.Event()
        rig.loop.on_turn = lambda record: turned.set()
        runner = asyncio.create_task(rig.loop.run(once=True))
        await rig.mic.put(utterance("are you there"))
        # the answer reached the voice and waits for it (an event, however long the turn took to get there)
        await asyncio.wait_for(clock.read.wait(), 60)
        assert not rig.sinks or not rig.sinks[0].chunks  # nothing was played without the voice
        clock.advance(0.25)
        engine = ToneTTS(ms_per_char=2.0)
        loaded.set_result(engine)
        await asyncio.wait_for(turned.wait(), 60)
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 60)
        await rig.close()
    assert engine.texts == ["I am here now."]
    assert rig.sinks and rig.sinks[0].chunks  # it was played
    assert [r["ms"] for r in rig.audit.of("waited")] == [250.0]
