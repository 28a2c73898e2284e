"""Every provider fault still ends in a useful turn (issue 13 §4), with the scripted LLM in-process
(the same faults on the wire: tests/agent/test_llm_contract.py)."""

from __future__ import annotations

import json
import logging
import socket
import threading

import pytest

from toy_runtime.events import EventStatus
from toy_runtime.host.envelope import message_event
from toy_runtime.session.items import Speech
from toy_runtime.testing.scripted_llm import Reply
from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

from .conftest import MODES, Turn

FAST = {"read_timeout_s": 1.0, "first_token_timeout_s": 1.0}  # generous: a loaded machine is not a fault
NO_CUE = {"holding_cue_after_s": 600.0}

# what a healthy model would answer, per utterance: (visible text, [(event name, tool name, arguments)])
ANSWERS = {
    "bye": ("Bye bye, see you soon!", [("session.terminate", "terminate_session", {})]),
    "set the volume to 30": ("Okay, volume thirty!",
                             [("device.volume.adjust", "adjust_device_volume", {"mode": "absolute", "value": 30})]),
    "what is a whale": ("A whale is a very big animal that lives in the sea.", []),
    "再见": ("拜拜！", [("session.terminate", "terminate_session", {})]),
    "把音量调到30": ("好的！", [("device.volume.adjust", "adjust_device_volume", {"mode": "absolute", "value": 30})]),
}
WAITS_OUT_A_TIMEOUT = pytest.mark.slow  # the turn waits for the client's real read timeout: not in the fast lane
STREAM_FAULTS = ["http_500", "http_429", "http_400", "drop_before_done", "disconnect", "empty_stream",
                 pytest.param("hang", marks=WAITS_OUT_A_TIMEOUT), pytest.param("stall", marks=WAITS_OUT_A_TIMEOUT),
                 "garbage", "malformed_chunk"]


def answer(mode: str, utterance: str, **reply) -> Reply:
    text, events = ANSWERS[utterance]
    if mode == "dual_agent":
        block = "<agent_events>" + ", ".join(e[0] for e in events) + "</agent_events>" if events else ""
        return Reply(text=text + block, chunk_size=4, **reply)
    return Reply(text=text, tool_calls=[(tool, json.dumps(args)) for _, tool, args in events], chunk_size=4,
                 **reply)


async def assert_useful(h, turn: Turn, utterance: str) -> None:
    """bye ends the session once; volume becomes 30 with one change; anything else ends in the fault line."""
    spoken = turn.speech()
    assert spoken, "a turn is never silent"
    ran = [e for e in turn.events if e.status is EventStatus.SUCCEEDED]
    if utterance in ("bye", "再见"):
        assert turn.end.terminated
        assert [e.name for e in ran] == ["session.terminate"]
        assert h.mixer.changes == []
    elif utterance in ("set the volume to 30", "把音量调到30"):
        assert (await h.mixer.get()).level == 30
        assert h.mixer.changes == [("set_level", 30)]  # never run twice
        assert [e.name for e in ran] == ["device.volume.adjust"] and not turn.end.terminated
    else:
        assert " ".join(spoken).endswith(h.runtime.settings.agent.fault_line)
        assert turn.events == [] and not turn.end.terminated


@pytest.mark.parametrize("utterance", ["bye", "set the volume to 30", "what is a whale"])
@pytest.mark.parametrize("fault", STREAM_FAULTS)
@pytest.mark.parametrize("mode", MODES)
async def test_every_fault_ends_in_a_useful_turn(mode, fault, utterance, scripted_llm, make_harness):
    scripted_llm.add(answer(mode, utterance, fault=fault))
    h = make_harness(mode=mode, llm=scripted_llm, **FAST)
    h.runner.config = h.runner.config.model_copy(update=NO_CUE)
    turn = await h.turn(utterance)
    assert turn.metrics["fault"] is not None
    await assert_useful(h, turn, utterance)
    assert scripted_llm.errors == []


@pytest.mark.parametrize("utterance", ["再见", "把音量调到30"])
@pytest.mark.parametrize("fault", ["http_500", pytest.param("stall", marks=WAITS_OUT_A_TIMEOUT), "disconnect"])
@pytest.mark.parametrize("mode", MODES)
async def test_faults_in_chinese_still_carry_out_clear_requests(mode, fault, utterance, scripted_llm, make_harness):
    scripted_llm.add(answer(mode, utterance, fault=fault))
    h = make_harness(mode=mode, llm=scripted_llm, **FAST)
    h.runner.config = h.runner.config.model_copy(update=NO_CUE)
    turn = await h.turn(utterance)
    await assert_useful(h, turn, utterance)
    if "gate" in [s.kind for s in turn.speech_items]:
        assert any("\u4e00" <= ch <= "\u9fff" for ch in " ".join(turn.speech()))  # confirmed in Chinese


@pytest.mark.parametrize("utterance", ["bye", "set the volume to 30", "what is a whale"])
@pytest.mark.parametrize("mode", MODES)
async def test_unreachable_endpoint_goes_through_the_gate(mode, utterance, make_harness):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    h = make_harness(mode=mode, base_url=f"http://127.0.0.1:{port}/v1", **FAST)
    turn = await h.turn(utterance)
    assert turn.metrics["fault"] == "connect"
    if utterance == "what is a whale":
        assert " ".join(turn.speech()) == h.runtime.settings.agent.offline_line
    else:
        await assert_useful(h, turn, utterance)


async def test_partial_answer_then_fault_confirms_without_running_twice(scripted_llm, make_harness):
    """The event was dispatched and acknowledged before the cut: the gate adds nothing and says nothing more."""
    scripted_llm.add(answer("dual_agent", "set the volume to 30", fault="drop_before_done"))
    h = make_harness(mode="dual_agent", llm=scripted_llm, **FAST)
    turn = await h.turn("set the volume to 30")
    assert turn.metrics["fault"] == "truncated" and turn.metrics["path"] == "gate"
    assert turn.speech() == ["Okay, volume thirty!"]
    assert h.mixer.changes == [("set_level", 30)]
    assert h.audit.of("gate.used")[-1]["already_dispatched"] == ["device.volume.adjust"]


async def test_a_tool_call_cut_before_it_completed_is_run_by_the_gate_and_confirmed(scripted_llm, make_harness):
    """A streamed tool call is complete only at the stream's end: after a cut it never ran, so the gate runs it
    and says so after the model's words."""
    scripted_llm.add(answer("chat_agent_tools", "set the volume to 30", fault="drop_before_done"))
    h = make_harness(mode="chat_agent_tools", llm=scripted_llm, **FAST)
    turn = await h.turn("set the volume to 30")
    assert turn.speech(answer=1) == ["Okay, volume thirty!"] and turn.speech(answer=2) == ["Okay, volume 30."]
    assert h.mixer.changes == [("set_level", 30)]


async def test_a_cut_before_any_word_confirms_the_gate_action(scripted_llm, make_harness):
    scripted_llm.add(Reply(text="Bye bye, see you soon!", fault="disconnect", fault_after_chunks=0))
    h = make_harness(mode="dual_agent", llm=scripted_llm, **FAST)
    turn = await h.turn("bye")
    assert " ".join(turn.speech()) == "Bye bye! Talk to you soon." and turn.end.terminated


# -- the holding cue and the turn deadline -----------------------------------------------------------


async def run_releasing(h, text: str, release: threading.Event, **run) -> Turn:
    """Run a turn; the scripted first token is held until the holding cue has been seen (order, not durations)."""
    items = []
    async for item in h.runner.run(message_event(text), **run):
        if isinstance(item, Speech) and item.kind == "holding":
            release.set()
        items.append(item)
    release.set()
    return Turn(items)


@pytest.mark.parametrize("mode", MODES)
async def test_a_slow_first_token_gets_one_holding_cue_before_the_answer(mode, scripted_llm, make_harness):
    go = threading.Event()
    scripted_llm.add(answer(mode, "what is a whale", delay_s=30, release=go))
    h = make_harness(mode=mode, llm=scripted_llm, first_token_timeout_s=60)
    h.runner.config = h.runner.config.model_copy(update={"holding_cue_after_s": 0.01})
    turn = await run_releasing(h, "what is a whale", go)
    kinds = [s.kind for s in turn.speech_items]
    assert kinds[0] == "holding" and kinds.count("holding") == 1
    assert turn.speech_items[0].answer == 0 and turn.speech_items[0].text in h.runtime.settings.agent.holding_cues
    assert " ".join(turn.speech(answer=1)) == ANSWERS["what is a whale"][0]
    assert turn.metrics["fault"] is None and turn.metrics["holding_cue_ms"] is not None
    # the cue is not part of the conversation the model sees next time
    assert turn.speech_items[0].text not in json.dumps(h.runner.conversation.messages)


@pytest.mark.slow  # real waits (a first-token budget, a stall, an idle timeout): outside the fast lane
async def test_a_fast_answer_gets_no_holding_cue(scripted_llm, make_harness):
    scripted_llm.add(answer("dual_agent", "what is a whale"))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    h.runner.config = h.runner.config.model_copy(update={"holding_cue_after_s": 60.0})
    turn = await h.turn("what is a whale")
    assert "holding" not in [s.kind for s in turn.speech_items] and turn.metrics["holding_cue_ms"] is None


async def test_the_cue_counts_from_the_end_of_speech(scripted_llm, make_harness):
    """A turn handed over after the child already waited past the cue delay gets its cue at once."""
    go = threading.Event()
    scripted_llm.add(answer("dual_agent", "what is a whale", delay_s=30, release=go))
    h = make_harness(mode="dual_agent", llm=scripted_llm, first_token_timeout_s=60)
    h.runner.config = h.runner.config.model_copy(update={"holding_cue_after_s": 30.0, "turn_deadline_s": 120.0})
    turn = await run_releasing(h, "what is a whale", go, since_speech_s=31.0)
    assert turn.speech_items[0].kind == "holding"


async def test_holding_cues_vary_and_are_deterministic_under_a_seed():
    import random

    from toy_runtime.session.holding import HoldingCues

    lines = {"en": ("a", "b", "c"), "zh": ("甲", "乙")}
    first = HoldingCues(lines, random.Random(7))
    picks = [first.pick("en") for _ in range(30)]
    assert all(x != y for x, y in zip(picks, picks[1:])) and set(picks) == {"a", "b", "c"}
    again = HoldingCues(lines, random.Random(7))
    assert [again.pick("en") for _ in range(30)] == picks
    assert first.pick("zh") in ("甲", "乙") and first.pick("ko") in ("a", "b", "c")


@pytest.mark.slow  # real waits (a first-token budget, a stall, an idle timeout): outside the fast lane
@pytest.mark.parametrize("utterance", ["bye", "what is a whale"])
@pytest.mark.parametrize("mode", MODES)
async def test_the_turn_deadline_ends_in_the_gate_or_the_fault_line(mode, utterance, scripted_llm, make_harness):
    scripted_llm.add(answer(mode, utterance, fault="stall"))
    h = make_harness(mode=mode, llm=scripted_llm, first_token_timeout_s=60, read_timeout_s=60)
    h.runner.config = h.runner.config.model_copy(update={"turn_deadline_s": 0.2, **NO_CUE})
    turn = await h.turn(utterance)
    assert turn.metrics["fault"] == "deadline"
    await assert_useful(h, turn, utterance)


# -- provider habits absorbed: stale keep-alive connections, 400 on optional fields ----------------------


async def test_a_stale_keep_alive_connection_is_retried_once(scripted_llm, make_harness):
    scripted_llm.add(Reply(text="Hi there!", fault="close_keepalive"), Reply(text="Hello again."))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    first = await h.turn("hi")
    second = await h.turn("hi again")
    assert first.speech() == ["Hi there!"] and second.speech() == ["Hello again."]
    assert second.metrics["fault"] is None
    assert scripted_llm.dropped == 1 and h.runtime.chat_client.retries == 1


@pytest.mark.parametrize(("field", "mode"), [("stream_options", "dual_agent"), ("stream_options", "chat_agent_tools"),
                                             ("tools", "chat_agent_tools")])
async def test_a_rejected_optional_field_is_dropped_for_the_process(field, mode, make_harness, caplog):
    with ScriptedLLMTransport(default=Reply(text="Sure, here I am."), reject_fields=(field,)) as server:
        h = make_harness(mode=mode, llm=server)
        with caplog.at_level(logging.WARNING, logger="toy_runtime.agent.llm"):
            first = await h.turn("hello")
            second = await h.turn("hello again")
        requests = server.requests
    assert first.speech() == ["Sure, here I am."] and second.speech() == ["Sure, here I am."]
    assert [field in r for r in requests] == [True, False, False]  # rejected once, then never sent again
    if field == "tools":
        assert not any("tool_choice" in r for r in requests[1:])
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and field in r.getMessage()]
    assert len(warnings) == 1
