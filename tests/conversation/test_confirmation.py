"""Issue 26 §2: an event whose definition requires confirmation asks the child; the NEXT turn's yes runs it (once,
with the arguments asked about), a no cancels it and says so, a new topic, a late answer or the end of the session
drops it unrun; nothing promises the action before the yes; the audit records ask / confirmed / cancelled.

The event is the test's own (the kernel and the session never name it), registered next to the built-in ones;
real turns through the real openai client against the scripted OpenAI-compatible LLM, in-process.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from toy_runtime.events import EventDefinition, EventStatus, Resolution, ResultPolicy
from toy_runtime.events.definition import CONFIRMATION_NOTE
from toy_runtime.events.kernel import CONFIRMATION_QUESTIONS
from toy_runtime.fakes.clock import ManualClock
from toy_runtime.session.confirmation import DECLINED_LINES, DONE_LINES, EXPIRED_LINES
from toy_runtime.testing.scripted_llm import Reply

from .conftest import MODES

NAME, TOOL = "test.drawing.erase", "erase_drawing"
QUESTION = {"en": "Do you really want me to erase drawing {n}?", "zh": "你真的要我擦掉第{n}张画吗？"}
DONE = {"en": "Okay, drawing {n} is erased.", "zh": "好了，第{n}张画擦掉了。"}
GATE_REPLY = {"en": "Okay, erasing drawing {n} now.", "zh": "好的，现在擦掉第{n}张画。"}
ASK = {"en": "erase drawing 3", "zh": "把第3张画擦掉"}
YES = {"en": ["yes", "yeah", "sure, do it", "okay"], "zh": ["好的", "是", "可以", "对"]}
NO = {"en": ["no", "nope", "don't do it", "cancel"], "zh": ["不要", "不", "算了", "取消"]}
# every word of the action's own lines: none may be said before the yes
PROMISES = ("erased", "erasing", "擦掉了", "现在擦掉")


class Drawings:
    """The test event's side effect: which drawings were erased, in order."""

    def __init__(self) -> None:
        self.erased: list[dict] = []

    def definition(self) -> EventDefinition:
        async def erase(arguments, ctx):
            self.erased.append(dict(arguments))
            return {"erased": arguments["number"]}

        def resolve(proposed, ctx):
            digits = [c for c in ctx.utterance if c.isdigit()]
            if digits:
                return Resolution(arguments={"number": int(digits[0])})
            if proposed and "number" in proposed:
                return Resolution(arguments={"number": int(proposed["number"])})
            return Resolution(arguments={}, missing=("number",), question="Which drawing?", needs_user=True)

        def line(lines):
            return lambda args, info: lines[info.get("locale", "en")].format(n=args["number"])

        return EventDefinition(
            name=NAME, version=1, tool_name=TOOL, description="Erase one of the child's saved drawings.",
            schema={"type": "object", "properties": {"number": {"type": "integer", "minimum": 1}},
                    "required": ["number"], "additionalProperties": False},
            resolver=resolve, handler=erase, result_policy=ResultPolicy.TEMPLATE_FOLLOW_UP, llm_fallback=False,
            requires_confirmation=True, confirmation_question=line(QUESTION), success_template=line(DONE),
            gate_match=lambda ctx: "erase drawing" in ctx.utterance or "擦掉" in ctx.utterance,
            gate_reply=line(GATE_REPLY))


def asking_reply(mode: str) -> Reply:
    """The model hands the request on (its own words promise nothing; the kernel asks)."""
    if mode == "dual_agent":
        return Reply(text=f"Hmm, let me check.<agent_events>{NAME}</agent_events>")
    return Reply(text="Hmm, let me check.", tool_calls=[(TOOL, json.dumps({"number": 3}))])


def harness(make_harness, scripted_llm, mode, **kw):
    drawings = Drawings()
    h = make_harness(mode=mode, llm=scripted_llm, events=[drawings.definition()], **kw)
    return h, drawings


async def ask(h, scripted_llm, mode, locale):
    """Turn 1: the request is held and the question asked; nothing ran and nothing promised it."""
    scripted_llm.add(asking_reply(mode))
    turn = await h.turn(ASK[locale])
    assert [(e.name, e.status) for e in turn.events] == [(NAME, EventStatus.NEEDS_CONFIRMATION)]
    assert QUESTION[locale].format(n=3) in " ".join(turn.speech())
    assert not any(word in " ".join(turn.speech()) for word in PROMISES)
    [asked] = h.audit.of("confirmation.asked")
    assert asked["name"] == NAME and asked["arguments"] == {"number": 3}
    return turn


def kinds(h, kind):
    return [(r["name"], r.get("reason")) for r in h.audit.of(kind)]


@pytest.mark.parametrize("locale", ["en", "zh"])
@pytest.mark.parametrize("mode", MODES)
async def test_a_yes_in_the_next_turn_runs_the_held_event_once_with_the_asked_arguments(mode, locale, scripted_llm,
                                                                                         make_harness):
    for yes in YES[locale]:
        h, drawings = harness(make_harness, scripted_llm, mode)
        await ask(h, scripted_llm, mode, locale)
        calls = len(scripted_llm.requests)
        turn = await h.turn(yes)
        assert drawings.erased == [{"number": 3}], yes
        assert [(e.name, e.status) for e in turn.events] == [(NAME, EventStatus.SUCCEEDED)]
        assert " ".join(turn.speech()) == DONE[locale].format(n=3)
        assert len(scripted_llm.requests) == calls and turn.metrics["path"] == "confirmation"  # no model needed
        assert kinds(h, "confirmation.confirmed") == [(NAME, None)]
        assert h.audit.of("confirmation.confirmed")[0]["event_id"] == h.audit.of("confirmation.asked")[0]["event_id"]
        # a second yes has nothing left to confirm: the model answers it, and nothing runs again
        scripted_llm.add(Reply(text="Yay!"))
        again = await h.turn(yes)
        assert drawings.erased == [{"number": 3}] and again.events == [] and again.speech() == ["Yay!"]


@pytest.mark.parametrize("locale", ["en", "zh"])
@pytest.mark.parametrize("mode", MODES)
async def test_a_no_cancels_the_held_event_and_says_so(mode, locale, scripted_llm, make_harness):
    for no in NO[locale]:
        h, drawings = harness(make_harness, scripted_llm, mode)
        await ask(h, scripted_llm, mode, locale)
        calls = len(scripted_llm.requests)
        turn = await h.turn(no)
        assert drawings.erased == [] and turn.events == []
        assert " ".join(turn.speech()) == DECLINED_LINES[locale]
        assert len(scripted_llm.requests) == calls
        assert kinds(h, "confirmation.cancelled") == [(NAME, "declined")]
        assert kinds(h, "confirmation.confirmed") == []
        scripted_llm.add(Reply(text="Okay!"))
        await h.turn("yes")  # too late: the no settled it
        assert drawings.erased == []


@pytest.mark.parametrize("locale", ["en", "zh"])
@pytest.mark.parametrize("mode", MODES)
async def test_a_new_topic_cancels_the_held_event(mode, locale, scripted_llm, make_harness):
    h, drawings = harness(make_harness, scripted_llm, mode)
    await ask(h, scripted_llm, mode, locale)
    scripted_llm.add(Reply(text="Whales are huge!"))
    topic = {"en": "what is a whale", "zh": "鲸鱼是什么"}[locale]
    turn = await h.turn(topic)
    assert turn.speech() == ["Whales are huge!"] and turn.events == []
    assert scripted_llm.requests[-1]["messages"][-1]["content"] == topic  # the model got the new topic
    assert kinds(h, "confirmation.cancelled") == [(NAME, "new_topic")]
    scripted_llm.add(Reply(text="Yes what?"))
    late = await h.turn(YES[locale][0])  # a yes after the new topic confirms nothing
    assert late.events == [] and drawings.erased == [] and late.speech() == ["Yes what?"]


@pytest.mark.parametrize("mode", MODES)
async def test_the_model_is_told_the_event_waits_for_the_childs_yes(mode, scripted_llm, make_harness):
    """Its reply is spoken before the question: it must know not to announce the action as done."""
    h, _ = harness(make_harness, scripted_llm, mode)
    await ask(h, scripted_llm, mode, "en")
    request = scripted_llm.requests[0]
    if mode == "dual_agent":
        catalog = " ".join(m["content"] for m in request["messages"] if m["role"] == "system")
        assert f"- {NAME}: Erase one of the child's saved drawings. {CONFIRMATION_NOTE}" in catalog
    else:
        [tool] = [t for t in request["tools"] if t["function"]["name"] == TOOL]
        assert CONFIRMATION_NOTE in tool["function"]["description"]
        assert all(CONFIRMATION_NOTE not in t["function"]["description"] for t in request["tools"] if t is not tool)


@pytest.mark.parametrize("mode", MODES)
async def test_a_confirmed_event_whose_result_the_model_words_gets_its_follow_up(mode, scripted_llm, make_harness):
    """An `llm_follow_up` event confirmed by a yes: its result is worded by the ONE follow-up call (never the
    offline line: the model is there), from the evidence."""
    looked_up = []

    async def look_up(arguments, ctx):
        looked_up.append(dict(arguments))
        return {"fact": "Octopuses have three hearts."}

    fact = EventDefinition(
        name="test.fact.reveal", version=1, tool_name="reveal_fact", description="Reveal the secret fact.",
        schema={"type": "object", "properties": {}, "additionalProperties": False},
        resolver=lambda proposed, ctx: Resolution(arguments={}), handler=look_up,
        result_policy=ResultPolicy.LLM_FOLLOW_UP, llm_fallback=False, requires_confirmation=True)
    h = make_harness(mode=mode, llm=scripted_llm, events=[fact])
    if mode == "dual_agent":
        scripted_llm.add(Reply(text="Ooh!<agent_events>test.fact.reveal</agent_events>"))
    else:
        scripted_llm.add(Reply(text="Ooh!", tool_calls=[("reveal_fact", "{}")]))
    first = await h.turn("tell me the secret fact")
    assert looked_up == [] and CONFIRMATION_QUESTIONS["en"] in " ".join(first.speech())
    scripted_llm.add(Reply(text="Octopuses have three hearts!"))
    turn = await h.turn("yes")
    assert looked_up == [{}] and turn.speech() == ["Octopuses have three hearts!"]
    follow_up = scripted_llm.requests[-1]
    assert "Octopuses have three hearts." in json.dumps(follow_up["messages"], ensure_ascii=False)
    assert turn.metrics["chat_calls"] == 1 and scripted_llm.errors == []


@pytest.mark.parametrize("locale", ["en", "zh"])
async def test_a_confirmed_event_with_no_line_of_its_own_is_said_to_be_done(locale, scripted_llm, make_harness):
    """A silent-success event confirmed by a yes: the turn is not silent, and not the fault line either."""
    ran = []

    async def reset(arguments, ctx):
        ran.append(dict(arguments))
        return {}

    quiet = EventDefinition(
        name="test.game.reset", version=1, tool_name="reset_game", description="Start the game over.",
        schema={"type": "object", "properties": {}, "additionalProperties": False},
        resolver=lambda proposed, ctx: Resolution(arguments={}), handler=reset,
        result_policy=ResultPolicy.SILENT_SUCCESS, llm_fallback=False, requires_confirmation=True)
    h = make_harness(mode="dual_agent", llm=scripted_llm, events=[quiet])
    scripted_llm.add(Reply(text="Hmm!<agent_events>test.game.reset</agent_events>"))
    await h.turn({"en": "start the game over", "zh": "游戏重新开始"}[locale])
    turn = await h.turn(YES[locale][0])
    assert ran == [{}] and " ".join(turn.speech()) == DONE_LINES[locale]


async def test_a_yes_after_the_timeout_runs_nothing_and_says_why(scripted_llm, make_harness):
    clock = ManualClock(datetime(2026, 6, 1, 10, 0, tzinfo=timezone.utc))
    h, drawings = harness(make_harness, scripted_llm, "dual_agent", clock=clock)
    await ask(h, scripted_llm, "dual_agent", "en")
    clock.advance(h.runtime.settings.agent.confirmation_timeout_s + 1)
    calls = len(scripted_llm.requests)
    turn = await h.turn("yes")
    assert drawings.erased == [] and turn.events == []
    assert " ".join(turn.speech()) == EXPIRED_LINES["en"] and len(scripted_llm.requests) == calls
    assert kinds(h, "confirmation.cancelled") == [(NAME, "expired")]


async def test_the_session_ending_drops_the_held_event(scripted_llm, make_harness):
    h, drawings = harness(make_harness, scripted_llm, "dual_agent")
    await ask(h, scripted_llm, "dual_agent", "en")
    h.runner.end_session()  # what the voice loop does when a session closes (idle, button, stop)
    assert kinds(h, "confirmation.cancelled") == [(NAME, "session_ended")]
    scripted_llm.add(Reply(text="Hello!"))
    turn = await h.turn("yes")
    assert turn.events == [] and drawings.erased == []


async def test_a_goodbye_in_the_asking_turn_drops_the_held_event(scripted_llm, make_harness):
    h, drawings = harness(make_harness, scripted_llm, "dual_agent")
    scripted_llm.add(Reply(text=f"Bye!<agent_events>{NAME}, session.terminate</agent_events>"))
    turn = await h.turn("erase drawing 3 and bye")
    assert turn.end.terminated and drawings.erased == []
    assert kinds(h, "confirmation.cancelled") == [(NAME, "session_ended")]


async def test_the_gate_asks_instead_of_promising_when_the_model_fails(scripted_llm, make_harness):
    """After a fault the gate carries out the child's clear request; for this one it must ask, not say it is
    erasing (its templated reply), and the next turn's yes then runs it."""
    h, drawings = harness(make_harness, scripted_llm, "dual_agent", first_token_timeout_s=1.0, read_timeout_s=1.0)
    scripted_llm.add(Reply(fault="http_500"))
    turn = await h.turn(ASK["en"])
    spoken = " ".join(turn.speech())
    assert turn.metrics["path"] == "gate"
    assert spoken == QUESTION["en"].format(n=3) and drawings.erased == []
    turn = await h.turn("yes")
    assert drawings.erased == [{"number": 3}]
