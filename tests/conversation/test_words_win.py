"""End-to-end turns in both modes: the child's words outrank what the model (ChatAgent or EventAgent) proposes.

Real openai client, the scripted OpenAI-compatible LLM in-process; in-memory mixer and calendar.
"""

from __future__ import annotations

import json

import pytest

from toy_runtime.events import EventStatus
from toy_runtime.testing.scripted_llm import Reply
from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

from .conftest import MODES

BLOCK = "<agent_events>{}</agent_events>"


def scripted(mode, reply, event, tool, proposed):
    """ChatAgent acknowledges and asks for one event (with `proposed` arguments in chat_agent_tools); the
    EventAgent, if it is ever asked, proposes the same wrong arguments. Records the EventAgent calls."""
    agent_calls = []

    def answer(request):
        if isinstance(request.get("tool_choice"), dict):  # EventAgent's forced named call
            agent_calls.append(request)
            return Reply(tool_calls=[(tool, json.dumps(proposed))])
        if mode == "dual_agent":
            return Reply(text=reply + BLOCK.format(event), chunk_size=3)
        return Reply(text=reply, tool_calls=[(tool, json.dumps(proposed))], chunk_size=3)

    return answer, agent_calls


@pytest.mark.parametrize("mode", MODES)
async def test_the_model_proposes_80_the_child_said_30(mode, make_harness):
    answer, agent_calls = scripted(mode, "Okay!", "device.volume.adjust", "adjust_device_volume",
                                   {"mode": "absolute", "value": 80})
    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode=mode, llm=server)
        turn = await h.turn("set the volume to 30")
    [event] = turn.events
    assert event.status is EventStatus.SUCCEEDED and dict(event.arguments) == {"mode": "absolute", "value": 30}
    assert (await h.mixer.get()).level == 30
    assert agent_calls == []  # the words settled it: no EventAgent call


@pytest.mark.parametrize("mode", MODES)
async def test_a_proposal_fills_only_the_direction_the_words_left_open(mode, make_harness):
    # "by 20" is the child's; louder or quieter is not said, so the model's sign is used — never its size
    answer, agent_calls = scripted(mode, "Okay!", "device.volume.adjust", "adjust_device_volume",
                                   {"mode": "relative", "delta": -80})
    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode=mode, llm=server)
        await h.mixer.set_level(50)
        turn = await h.turn("change the volume by 20")
    [event] = turn.events
    assert event.status is EventStatus.SUCCEEDED and dict(event.arguments) == {"mode": "relative", "delta": -20}
    assert (await h.mixer.get()).level == 30
    assert len(agent_calls) == (1 if mode == "dual_agent" else 0)  # dual_agent asks the EventAgent for the gap


@pytest.mark.parametrize("mode", MODES)
async def test_no_time_said_asks_and_the_answer_completes_it(mode, make_harness):
    wrong = {"title": "Plants", "start_at": "2030-01-01T07:00:00+08:00"}
    answer, agent_calls = scripted(mode, "Sure!", "calendar.schedule.create", "add_schedule", wrong)
    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode=mode, llm=server)
        first = await h.turn("remind me to water the plants")
        [event] = first.events
        assert event.status is EventStatus.NEEDS_CLARIFICATION and "start_at" not in event.arguments
        assert first.speech()[-1] == "What time should I remind you?"
        assert await h.calendar.list() == [] and agent_calls == []
        second = await h.turn("at 5 pm")
    [event] = second.events
    assert event.status is EventStatus.SUCCEEDED, event
    [entry] = await h.calendar.list()
    # the answer was read with the request it answered (visible history): the child's title, the child's time
    assert entry.title == "water the plants" and (entry.start_at.hour, entry.start_at.minute) == (17, 0)
    assert agent_calls == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_time_the_child_said_wins_over_the_proposed_one(mode, make_harness):
    wrong = {"title": "Water plants", "start_at": "2030-01-01T07:00:00+08:00"}
    answer, _ = scripted(mode, "Sure!", "calendar.schedule.create", "add_schedule", wrong)
    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode=mode, llm=server)
        turn = await h.turn("remind me to water the plants at 5 pm tomorrow")
    [event] = turn.events
    assert event.status is EventStatus.SUCCEEDED, event
    [entry] = await h.calendar.list()
    assert entry.title == "water the plants" and (entry.start_at.hour, entry.start_at.minute) == (17, 0)
    assert entry.start_at.year != 2030
