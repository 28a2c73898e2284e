"""Silence after a confirmation question: the voice session closes (idle) and the held event is dropped unrun; a
"yes" in the next session is just words to the model. The VoiceLoop over fakes plus the scripted LLM on loopback."""

from __future__ import annotations

import pytest

import asyncio

from tests.conversation.test_confirmation import NAME, QUESTION, Drawings
from toy_runtime.session.voice_loop import Stop
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer

from .test_voice_loop import Rig, closed_reasons, until, utterance


@pytest.mark.slow  # real waits (a first-token budget, a stall, an idle timeout): outside the fast lane
async def test_a_question_left_unanswered_until_the_session_closes_never_runs(tmp_path):
    drawings = Drawings()
    with ScriptedLLMServer([Reply(text=f"Hmm, let me check.<agent_events>{NAME}</agent_events>"),
                            Reply(text="Yes to what?")]) as llm:
        rig = Rig(tmp_path, llm.url, idle_timeout_s=0.5, realtime=False, events=[drawings.definition()])
        runner = asyncio.create_task(rig.loop.run())
        await rig.mic.put(utterance("erase drawing 3"))
        await until(lambda: closed_reasons(rig))  # the child says nothing more: only the idle timeout closes it
        assert closed_reasons(rig) == ["idle"]
        cancelled = rig.audit.of("confirmation.cancelled")
        assert [(r["name"], r["reason"]) for r in cancelled] == [(NAME, "session_ended")]
        await rig.mic.put(utterance("yes"))  # a new session: the yes confirms nothing
        await until(lambda: len(rig.loop.records) == 2)
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 60)
        await rig.close()
    first, second = rig.loop.records
    assert QUESTION["en"].format(n=3) in " ".join(first.spoken)
    assert drawings.erased == [] and " ".join(second.spoken) == "Yes to what?"
