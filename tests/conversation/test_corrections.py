"""No promise left standing (issue 13 §5): an action the model announced that did not run is corrected, truthfully,
from a template (no extra LLM call)."""

from __future__ import annotations

import json

import pytest

from toy_runtime.events import EventStatus
from toy_runtime.events.continuation import NOT_RUN_LINES
from toy_runtime.testing.scripted_llm import Reply
from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

from .conftest import MODES
from .test_turns import is_follow_up

PROMISE = "Okay, volume thirty-five coming up."
UNCLEAR = "make it louder, like 35, and then tell me a joke"  # no gate match: only the model could act on it


@pytest.mark.parametrize("mode", MODES)
async def test_an_unknown_event_is_corrected(mode, scripted_llm, make_harness):
    if mode == "dual_agent":
        scripted_llm.add(Reply(text=PROMISE + "<agent_events>device.volume.boost</agent_events>"))
    else:
        scripted_llm.add(Reply(text=PROMISE, tool_calls=[("boost_volume", json.dumps({"level": 35}))]))
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn(UNCLEAR)
    assert turn.events == [] and h.mixer.changes == []
    assert turn.speech(answer=1) == [PROMISE]
    assert turn.speech(answer=2) == [NOT_RUN_LINES["en"]]
    assert turn.end.llm_calls == 1 and len(scripted_llm.requests) == 1  # a template, no extra call
    assert h.audit.of("turn.not_run")[0]["names"] == [turn.metrics["dropped_events"][0]]


@pytest.mark.parametrize("mode", MODES)
async def test_a_clear_request_whose_event_was_unknown_is_still_carried_out(mode, scripted_llm, make_harness):
    if mode == "dual_agent":
        scripted_llm.add(Reply(text="Bye bye!<agent_events>session.end</agent_events>"))
    else:
        scripted_llm.add(Reply(text="Bye bye!", tool_calls=[("end_session", "{}")]))
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn("bye")
    assert turn.end.terminated and turn.speech() == ["Bye bye!"]  # no second farewell, no correction
    assert turn.metrics["path"] == "gate"


async def test_the_correction_follows_the_childs_language(scripted_llm, make_harness):
    scripted_llm.add(Reply(text="好的，马上！<agent_events>device.volume.boost</agent_events>"))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    turn = await h.turn("大声一点点吧然后讲故事")
    assert turn.speech(answer=2) == [NOT_RUN_LINES["zh"]]


async def test_an_unclosed_block_is_corrected_with_the_definitions_own_line(scripted_llm, make_harness):
    scripted_llm.add(Reply(text=PROMISE + "<agent_events>device.volume.adjust", chunk_size=3))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    turn = await h.turn(UNCLEAR)
    assert turn.events == [] and h.mixer.changes == []
    assert turn.speech() == [PROMISE, "Sorry, I couldn't change the volume."]


async def test_an_unreadable_unclosed_block_gets_the_generic_correction(scripted_llm, make_harness):
    scripted_llm.add(Reply(text=PROMISE + "<agent_events>", chunk_size=3))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    turn = await h.turn(UNCLEAR)
    assert turn.speech() == [PROMISE, NOT_RUN_LINES["en"]]


@pytest.mark.parametrize("mode", MODES)
async def test_an_event_that_fails_validation_is_corrected(mode, scripted_llm, make_harness):
    args = {"mode": "absolute", "value": 300}
    if mode == "dual_agent":
        scripted_llm.add(Reply(text="Okay, volume three hundred!<agent_events>device.volume.adjust</agent_events>"))
    else:
        scripted_llm.add(Reply(text="Okay, volume three hundred!", tool_calls=[("adjust_device_volume", json.dumps(args))]))
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn("set the volume to 300")
    [event] = turn.events
    assert event.status is EventStatus.REJECTED and h.mixer.changes == []
    assert turn.speech(answer=2) == ["I can only set the volume from 0 to 100."]


@pytest.mark.parametrize("mode", MODES)
async def test_an_event_requested_in_the_follow_up_round_is_corrected(mode, make_harness):
    def respond(request):
        if is_follow_up(request):  # the follow-up promises an action it cannot start
            if mode == "dual_agent":
                return Reply(text="Dinosaurs were huge! I'll turn it up.<agent_events>device.volume.adjust"
                                  "</agent_events>")
            return Reply(text="Dinosaurs were huge! I'll turn it up.",
                         tool_calls=[("adjust_device_volume", json.dumps({"mode": "relative", "delta": 10}))])
        if mode == "dual_agent":
            return Reply(text="Let me check.<agent_events>knowledge.web.search</agent_events>")
        return Reply(text="Let me check.", tool_calls=[("web_search", json.dumps({"query": "dinosaurs"}))])

    with ScriptedLLMTransport(respond) as server:
        h = make_harness(mode=mode, llm=server)
        turn = await h.turn("tell me about dinosaurs")
    assert [e.name for e in turn.events] == ["knowledge.web.search"] and h.mixer.changes == []
    assert turn.speech(answer=2)[-1] == "Sorry, I couldn't change the volume."


async def test_a_bare_tool_call_is_confirmed_instead_of_a_silent_turn(scripted_llm, make_harness):
    scripted_llm.add(Reply(tool_calls=[("adjust_device_volume", json.dumps({"mode": "absolute", "value": 30}))]))
    h = make_harness(mode="chat_agent_tools", llm=scripted_llm)
    turn = await h.turn("set the volume to 30")
    assert (await h.mixer.get()).level == 30
    assert turn.speech() == ["Okay, volume 30."]


async def test_an_empty_answer_is_never_silent(scripted_llm, make_harness):
    scripted_llm.add(Reply(text=""))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    turn = await h.turn("tell me something")
    assert " ".join(turn.speech()) == h.runtime.settings.agent.fault_line


async def test_nothing_asked_nothing_corrected(scripted_llm, make_harness):
    scripted_llm.add(Reply(text="Whales sing songs under the sea."))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    turn = await h.turn("what do whales do")
    assert turn.speech() == ["Whales sing songs under the sea."] and not h.audit.of("turn.not_run")
