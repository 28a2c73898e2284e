"""Issue 34 §2: the child's words win even when the model fails — compound device requests ("mute and bye",
"静音然后再见") are carried out by the offline gate when the model answers HTTP 500 or stalls before its first token.

Real openai client against the scripted OpenAI-compatible LLM, in-process; in-memory mixer.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pytest

from toy_runtime.audit import NullAudit
from toy_runtime.events import EventStatus, ResolveContext
from toy_runtime.fakes import memory_ports
from toy_runtime.language import guess_locale
from toy_runtime.plugins import default_registry
from toy_runtime.session.compound import clauses
from toy_runtime.session.gate import OfflineGate
from toy_runtime.testing.scripted_llm import Reply

from .conftest import MODES

VOLUME, BYE = "device.volume.adjust", "session.terminate"
# utterance → (the mixer call it makes from level 50, the gate's lines in order)
COMPOUNDS = {
    "mute and bye": (("set_muted", True), ["Okay, muting now.", "Bye bye! Talk to you soon."]),
    "turn it down and say goodnight": (("set_level", 40), ["Okay, a bit quieter.", "Bye bye! Talk to you soon."]),
    "turn the volume up and goodbye": (("set_level", 60), ["Okay, a bit louder.", "Bye bye! Talk to you soon."]),
    "静音然后再见": (("set_muted", True), ["好的，静音了。", "拜拜，下次再聊！"]),
    "把声音调小然后再见": (("set_level", 40), ["好的，小声一点。", "拜拜，下次再聊！"]),
}
# statements and mixed requests that are not entirely clear device requests: the model's (here: the fault line)
NOT_CLEAR = ["I said bye to my friend", "mute and tell me a story", "I turned the volume down and said bye",
             "goodbye and turn off the lights", "mute and louder"]
FAILS = {"first_token_timeout_s": 1.0, "read_timeout_s": 1.0}


def healthy(mode: str) -> Reply:
    """What a healthy model would answer to "mute and bye" (used as the body a fault cuts off)."""
    if mode == "dual_agent":
        return Reply(text=f"Okay, bye!<agent_events>{VOLUME}, {BYE}</agent_events>")
    return Reply(text="Okay, bye!", tool_calls=[("adjust_device_volume", json.dumps({"mode": "mute"})),
                                                 ("terminate_session", "{}")])


def assert_carried_out(h, turn, utterance: str) -> None:
    """Both actions ran once, the session ended, and the child heard exactly the gate's lines."""
    change, lines = COMPOUNDS[utterance]
    assert h.mixer.changes == [change]
    assert [(e.name, e.status) for e in turn.events] == [(VOLUME, EventStatus.SUCCEEDED), (BYE, EventStatus.SUCCEEDED)]
    assert turn.end.terminated and h.runner.conversation.terminated
    assert " ".join(turn.speech()) == " ".join(lines)  # each line once (a line may be said in clause pieces)
    assert h.runtime.settings.agent.fault_line not in turn.speech()
    assert turn.metrics["path"] == "gate"


# -- the model fails (HTTP 500) --------------------------------------------------------------------------


@pytest.mark.parametrize("utterance", list(COMPOUNDS))
@pytest.mark.parametrize("mode", MODES)
async def test_a_compound_request_is_carried_out_when_the_model_answers_500(mode, utterance, scripted_llm,
                                                                            make_harness):
    scripted_llm.add(Reply(fault="http_500"))
    h = make_harness(mode=mode, llm=scripted_llm, **FAILS)
    turn = await h.turn(utterance)
    assert turn.metrics["fault"] == "http_500"
    assert_carried_out(h, turn, utterance)
    assert scripted_llm.errors == []


@pytest.mark.parametrize("utterance", NOT_CLEAR)
async def test_a_statement_or_a_mixed_request_is_not_acted_on_after_a_500(utterance, scripted_llm, make_harness):
    scripted_llm.add(Reply(fault="http_500"))
    h = make_harness(mode="dual_agent", llm=scripted_llm, **FAILS)
    turn = await h.turn(utterance)
    assert " ".join(turn.speech()) == h.runtime.settings.agent.fault_line
    assert turn.events == [] and h.mixer.changes == [] and not turn.end.terminated


async def test_a_compound_cut_after_the_model_dispatched_one_action_runs_the_other_once(scripted_llm, make_harness):
    """The model's block asked only for the volume, then the stream broke: the gate adds the goodbye, never a
    second volume change, and (the model's words already said goodbye) no second farewell."""
    scripted_llm.add(Reply(text=f"Okay, bye bye!<agent_events>{VOLUME}</agent_events> And", fault="drop_before_done"))
    h = make_harness(mode="dual_agent", llm=scripted_llm, **FAILS)
    turn = await h.turn("mute and bye")
    assert h.mixer.changes == [("set_muted", True)]
    assert [e.name for e in turn.events if e.status is EventStatus.SUCCEEDED] == [VOLUME, BYE]
    assert turn.end.terminated and " ".join(turn.speech()) == "Okay, bye bye!"


# -- the model stalls before its first token ---------------------------------------------------------------


@pytest.mark.slow  # real waits (a first-token budget, a stall, an idle timeout): outside the fast lane
@pytest.mark.parametrize("utterance", list(COMPOUNDS))
@pytest.mark.parametrize("mode", MODES)
async def test_under_a_stall_the_gate_acts_after_the_first_token_budget(mode, utterance, scripted_llm, make_harness):
    """The server sends its headers and then nothing: past `gate_first_token_s` the gate mutes/turns down, says so,
    and ends the session — long before the first-token timeout or the turn deadline, and with no fault line."""
    scripted_llm.add(Reply(text="Okay, bye!", fault="stall"))
    h = make_harness(mode=mode, llm=scripted_llm, gate_first_token_s=0.2, first_token_timeout_s=120.0,
                     read_timeout_s=120.0)
    started = time.monotonic()
    turn = await h.turn(utterance)
    assert time.monotonic() - started < 60.0  # a safety bound only: without the budget this waits out 120 s
    assert turn.metrics["fault"] == "first_token_budget"
    assert_carried_out(h, turn, utterance)
    assert {s.answer for s in turn.speech_items} == {1}  # the gate's lines are the answer; no holding cue
    [used] = h.audit.of("gate.used")
    assert used["after"] == "first_token_budget" and used["already_dispatched"] == []
    assert scripted_llm.errors == []


@pytest.mark.slow  # real waits (a first-token budget, a stall, an idle timeout): outside the fast lane
async def test_a_stalled_model_is_not_waited_for_by_the_default_budget(scripted_llm, make_harness):
    """The default budget (1.5 s) acts long before the default first-token timeout (15 s) would give up."""
    scripted_llm.add(Reply(fault="stall"))
    h = make_harness(mode="dual_agent", llm=scripted_llm, gate_first_token_s=1.5, first_token_timeout_s=15.0)
    assert type(h.runtime.settings.llm).model_fields["gate_first_token_s"].default == 1.5
    turn = await h.turn("mute and bye")
    assert turn.metrics["fault"] == "first_token_budget"
    assert_carried_out(h, turn, "mute and bye")


@pytest.mark.slow  # real waits (a first-token budget, a stall, an idle timeout): outside the fast lane
async def test_no_holding_cue_before_the_gates_lines(scripted_llm, make_harness):
    """While the gate may still answer, the holding cue waits: the child hears "Okay, muting now", not "Hmm, let me
    think" first (the cue is due long before the budget here)."""
    scripted_llm.add(Reply(fault="stall"))
    h = make_harness(mode="dual_agent", llm=scripted_llm, gate_first_token_s=0.5, first_token_timeout_s=120.0)
    h.runner.config = h.runner.config.model_copy(update={"holding_cue_after_s": 0.01})
    turn = await h.turn("mute and bye")
    assert "holding" not in [s.kind for s in turn.speech_items] and h.audit.of("turn.holding_cue") == []
    assert_carried_out(h, turn, "mute and bye")


@pytest.mark.slow  # real waits (a first-token budget, a stall, an idle timeout): outside the fast lane
async def test_a_question_under_a_stall_is_not_answered_by_the_gate(scripted_llm, make_harness):
    """Only a request that is entirely clear device actions and goodbye skips the model: anything else still waits
    for the model's first token (here: until its timeout, then the fault line)."""
    scripted_llm.add(Reply(fault="stall"))
    h = make_harness(mode="dual_agent", llm=scripted_llm, gate_first_token_s=0.05, first_token_timeout_s=1.0)
    turn = await h.turn("mute and tell me a story")
    assert turn.metrics["fault"] == "first_token_timeout"
    assert " ".join(turn.speech()) == h.runtime.settings.agent.fault_line and h.mixer.changes == []


# -- what the gate reads as one clear compound (no model at all) ----------------------------------------------


def gate_plan(utterance: str) -> list[tuple[str, dict | None]]:
    gate = OfflineGate(default_registry(memory_ports()), NullAudit())
    context = ResolveContext(utterance=utterance, request_time=datetime(2026, 12, 3, 8, tzinfo=timezone.utc),
                             timezone="UTC", locale=guess_locale(utterance))
    return [(step.definition.name, step.arguments) for step in gate.plan(context)]


def test_clauses_are_cut_at_conjunctions_in_english_and_chinese():
    assert clauses("mute and bye") == ["mute", "bye"]
    assert clauses("Mute, then bye.") == ["Mute", "bye"]
    assert clauses("turn it down and then say goodnight") == ["turn it down", "say goodnight"]
    assert clauses("静音然后再见") == ["静音", "再见"]  # 再见 keeps its 再
    assert clauses("静音，然后再见！") == ["静音", "再见"]
    assert clauses("Mute! Bye.") == ["Mute", "Bye"] and clauses("静音。再见。") == ["静音", "再见"]
    assert clauses("set the volume to 0.5") == ["set the volume to 0.5"]
    assert clauses("I said bye to my friend") == ["I said bye to my friend"]
    assert clauses("standing by the band") == ["standing by the band"]


def test_every_clause_must_be_a_clear_request():
    assert gate_plan("mute and bye") == [(VOLUME, {"mode": "mute"}), (BYE, {})]
    assert gate_plan("把声音调小然后再见") == [(VOLUME, {"mode": "relative", "delta": -10}), (BYE, {})]
    assert gate_plan("set the volume to 30 and bye") == [(VOLUME, {"mode": "absolute", "value": 30}), (BYE, {})]
    assert gate_plan("bye bye and see you tomorrow") == [(BYE, {})]
    # the volume's own gate_match takes "louder please, goodbye" whole: the goodbye must not be lost
    assert gate_plan("louder please, goodbye") == [(VOLUME, {"mode": "relative", "delta": 10}), (BYE, {})]
    assert gate_plan("okay, bye") == [(BYE, None)] and gate_plan("mute, please") == [(VOLUME, None)]
    assert gate_plan("bye") == [(BYE, None)] and gate_plan("mute") == [(VOLUME, None)]
    assert gate_plan("mute, bye, bye, bye") == [(VOLUME, {"mode": "mute"}), (BYE, {})]
    for utterance in NOT_CLEAR + ["what is a whale", "mute and what is a whale", "say goodbye to grandma",
                                  "mute, bye, bye, bye, bye and tell me a story"]:
        assert gate_plan(utterance) == [], utterance


def test_only_an_utterance_of_nothing_but_clear_requests_skips_a_stalled_model():
    gate = OfflineGate(default_registry(memory_ports()), NullAudit())

    def covers(utterance):
        return gate.covers(ResolveContext(utterance=utterance, request_time=datetime(2026, 12, 3, tzinfo=timezone.utc),
                                          timezone="UTC", locale=guess_locale(utterance)))

    for utterance in list(COMPOUNDS) + ["bye", "mute", "把音量调到30", "louder please, goodbye"]:
        assert covers(utterance), utterance
    # matched whole after a fault (the volume's gate_match reads past a comma), but a question is in it
    assert gate_plan("mute, what is a whale") == [(VOLUME, None)] and not covers("mute, what is a whale")
    for utterance in NOT_CLEAR + ["what is a whale", "mute, bye, bye, bye, bye"]:  # more clauses than a request has
        assert not covers(utterance), utterance
