"""Speculative answering through the voice loop and a real loopback LLM server: a request sent during the
end-of-turn wait is taken by its turn when the child said no more, and cancelled unread — nothing spoken, nothing
run — when the child went on."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.voice.test_voice_loop import Rig, until, utterance
from toy_runtime.audio.listener import EarlyTranscript, SpeechStart
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer


def speculation(rig) -> list[str]:
    return [r["outcome"] for r in rig.audit.of("llm.speculation")]


async def _open_and_speculate(rig, text: str) -> asyncio.Task:
    """`run`'s start: the model's client warmed; the child starts speaking (the session opens), and early in the
    silence the transcript so far arrives with a wait the toy cannot shorten."""
    await rig.runtime.warm()
    rig.loop.speculate = True
    runner = asyncio.create_task(rig.loop.run(once=True), name="test:voice-loop")
    now = time.monotonic()
    await rig.mic.put(SpeechStart(at=now, detected_at=now))
    await rig.mic.put(EarlyTranscript(text, "unsure", wait_ms=300.0, silent_ms=120.0))
    await until(lambda: speculation(rig)[:1] == ["started"])
    return runner


@pytest.mark.slow  # real waits: a reply held 0.3 s on the loopback server, so the speculation is in flight
async def test_the_turn_takes_the_answer_that_was_asked_for_during_the_wait(tmp_path):
    with ScriptedLLMServer([Reply(text="Once upon a time, a dragon learned to fly.", delay_s=0.3)]) as llm:
        rig = Rig(tmp_path, llm.url)
        runner = await _open_and_speculate(rig, "tell me a story")
        await rig.mic.put(utterance("tell me a story"))
        await until(lambda: len(rig.loop.records) == 1)
        await rig.mic.put(None)
        await asyncio.wait_for(runner, 30)
        await rig.close()
        requests = llm.requests
    assert len(requests) == 1  # asked once, during the wait; the turn did not ask again
    assert speculation(rig) == ["started", "adopted"]
    [adopted] = [r for r in rig.audit.of("llm.speculation") if r["outcome"] == "adopted"]
    assert adopted["ahead_ms"] > 0
    assert "Once upon a time, a dragon learned to fly." in " ".join(rig.loop.records[0].spoken)


@pytest.mark.slow  # real waits: the speculative answer arrives and sits unread for 0.4 s
async def test_when_the_child_goes_on_the_speculation_is_cancelled_unread(tmp_path):
    """The speculative answer would have turned the volume down and said so: the child was still talking, so it
    never speaks and never runs; the turn asks for the whole sentence."""
    with ScriptedLLMServer([Reply(text="Sure, I'll make it quieter.<agent_events>device.volume.adjust</agent_events>",
                                  delay_s=0.2),
                            Reply(text="Okay, a story about a quiet dragon!")]) as llm:
        rig = Rig(tmp_path, llm.url)
        level = rig.mixer.level
        runner = await _open_and_speculate(rig, "turn it down")
        await asyncio.sleep(0.4)  # the speculative answer (event included) has arrived and sits unread
        await rig.mic.put(utterance("turn it down and tell me a story"))
        await until(lambda: len(rig.loop.records) == 1)
        await rig.mic.put(None)
        await asyncio.wait_for(runner, 30)
        await rig.close()
        requests = llm.requests
    assert len(requests) == 2
    assert speculation(rig) == ["started", "cancelled"]
    assert rig.audit.of("llm.speculation")[1]["reason"] == "the turn asked for other words"
    assert rig.runtime.chat_client.prefetch_cancelled == 1 and rig.runtime.chat_client.prefetch_hits == 0
    assert rig.mixer.level == level and not rig.mixer.changes  # the speculative event never ran
    spoken = " ".join(rig.loop.records[0].spoken)
    assert "quieter" not in spoken and "quiet dragon" in spoken
    assert not rig.audit.of("event.dispatched") and not rig.audit.of("chat.event_block")


async def test_a_session_that_closes_cancels_its_speculation(tmp_path):
    with ScriptedLLMServer([Reply(text="Hello!", delay_s=0.2)]) as llm:
        rig = Rig(tmp_path, llm.url)
        runner = await _open_and_speculate(rig, "hello")
        await rig.mic.put(None)  # the source ends: the session closes with nothing said
        await asyncio.wait_for(runner, 30)
        await rig.close()
    assert speculation(rig) == ["started", "cancelled"] and not rig.loop.records
