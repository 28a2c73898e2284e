"""Truthful on the scripted provider (issue 27): no promise without its action, no disruptive event the child never
asked for, no repeat rule the child never said — in both invocation modes."""

from __future__ import annotations

import json

import pytest

from toy_runtime.events import EventStatus
from toy_runtime.fakes.device import MemoryMixer
from toy_runtime.ports.device import MixerError
from toy_runtime.testing.scripted_llm import Reply
from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

from .conftest import MODES

BLOCK = "<agent_events>{}</agent_events>"
VOLUME, BYE, SCHEDULE = "device.volume.adjust", "session.terminate", "calendar.schedule.create"
REMIND = "remind me to feed the cat tomorrow at three"


def reply(mode, text, calls):
    """`text` with these events: [(name, tool_name, arguments)], as a block or as native tool calls."""
    if mode == "dual_agent":
        return Reply(text=text + (BLOCK.format(", ".join(c[0] for c in calls)) if calls else ""), chunk_size=3)
    return Reply(text=text, tool_calls=[(tool, json.dumps(args)) for _, tool, args in calls], chunk_size=3)


# -- promises without their action ------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("words, promise, level", [
    ("turn the volume down to ten", "Okay, I've lowered the volume to ten.", 10),
    ("把音量调到十", "好的，已经把音量调到十了。", 10),
])
async def test_a_volume_promise_without_its_event_still_happens(mode, words, promise, level, scripted_llm,
                                                               make_harness):
    scripted_llm.add(reply(mode, promise, []))
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn(words)
    [event] = turn.events
    assert event.name == VOLUME and event.status is EventStatus.SUCCEEDED and h.mixer.level == level
    assert turn.speech() == [promise]  # the model's claim is now true; no second confirmation, no correction
    assert h.audit.of("chat.unbacked_promise") == []
    assert h.audit.of("gate.used")[0]["after"] == "unmarked"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("words, farewell", [("bye bye", "Bye!"), ("再见", "再见！")])
async def test_a_goodbye_without_its_event_ends_the_session(mode, words, farewell, scripted_llm, make_harness):
    scripted_llm.add(reply(mode, farewell, []))
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn(words)
    assert turn.end.terminated and [e.name for e in turn.events] == [BYE]
    assert turn.speech() == [farewell]  # one goodbye, not two


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("words, claim, correction", [
    ("tell me a joke", "I've set a reminder for you!", "Sorry, I couldn't add that reminder."),
    ("讲个笑话", "我会提醒你的。", "抱歉，我没能添加这个提醒。"),
])
async def test_a_claim_no_event_backs_is_audited_and_corrected(mode, words, claim, correction, scripted_llm,
                                                               make_harness):
    joke = "Why did the cat sit on the computer? To keep an eye on the mouse!"
    scripted_llm.add(reply(mode, f"{claim} {joke}", []))
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn(words)
    assert turn.events == [] and await h.calendar.list() == []
    [audit] = h.audit.of("chat.unbacked_promise")
    assert audit["name"] == SCHEDULE and audit["sentence"] == claim
    assert turn.speech(answer=2) == [correction]  # not left standing
    assert turn.end.llm_calls == 1  # a template, no extra call


@pytest.mark.parametrize("mode", MODES)
async def test_a_promise_whose_event_fails_is_corrected_once(mode, scripted_llm, make_harness):
    """The words are clear, the gate carries the request out, the mixer fails: the failure line corrects the claim."""
    scripted_llm.add(reply(mode, "Okay, I've lowered the volume to ten.", []))
    h = make_harness(mode=mode, llm=scripted_llm,
                     mixer=MemoryMixer(error=MixerError("no_control", "no mixer control"), fail_on={"set_level"}))
    turn = await h.turn("turn the volume down to ten")
    assert turn.events[0].status is EventStatus.FAILED
    assert turn.speech(answer=2) == ["Sorry, I couldn't change the volume."]
    assert h.audit.of("chat.unbacked_promise") == []  # it was tried: the failure line is its correction


@pytest.mark.parametrize("mode", MODES)
async def test_a_promise_the_words_leave_unclear_is_corrected(mode, scripted_llm, make_harness):
    """No clear request for the gate ("make it sound nicer"), no event marked, a claim spoken: corrected."""
    scripted_llm.add(reply(mode, "I've turned the volume up a little.", []))
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn("make it sound nicer")
    assert turn.events == [] and h.mixer.changes == []
    assert [a["name"] for a in h.audit.of("chat.unbacked_promise")] == [VOLUME]
    assert turn.speech(answer=2) == ["Sorry, I couldn't change the volume."]


@pytest.mark.parametrize("mode", MODES)
async def test_an_unasked_farewell_is_corrected(mode, scripted_llm, make_harness):
    """The model said goodbye to a joke request and marked nothing: the toy stays, and says it did not leave."""
    scripted_llm.add(reply(mode, "Here is one: what do cats eat? Mice cream! Bye!", []))
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn("tell me a cat joke")
    assert not turn.end.terminated
    assert [a["name"] for a in h.audit.of("chat.unbacked_promise")] == [BYE]
    assert turn.speech(answer=2) == ["Sorry, I couldn't end our chat just now."]


# -- events the child never asked for ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
async def test_an_unasked_terminate_is_refused(mode, scripted_llm, make_harness):
    scripted_llm.add(reply(mode, "Okay, volume forty!", [(VOLUME, "adjust_device_volume", {"mode": "absolute",
                                                                                          "value": 40}),
                                                       (BYE, "terminate_session", {})]),
                   reply(mode, "What do cats like? Purr-fect jokes!", [(BYE, "terminate_session", {})]),
                   reply(mode, "Bye bye!", [(BYE, "terminate_session", {})]))
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn("volume at forty")
    assert h.mixer.level == 40 and not turn.end.terminated
    by_name = {e.name: e for e in turn.events}  # a refusal may settle before the volume change does
    assert set(by_name) == {VOLUME, BYE}
    bye = by_name[BYE]
    assert bye.status is EventStatus.REJECTED and bye.error_code == "not_asked"
    assert turn.speech() == ["Okay, volume forty!"]  # nobody asked to leave: no failure line about leaving
    [refused] = h.audit.of("event.refused")
    assert refused["name"] == BYE and refused["reason"] == "not_asked"
    remembered = " ".join(str(m) for m in h.runner.conversation.messages)
    assert "terminate" not in remembered  # the refused goodbye is not shown back to the model as done
    joke = await h.turn("tell me a cat joke")  # the session goes on
    assert not joke.end.terminated and len(h.audit.of("event.refused")) == 2
    goodbye = await h.turn("ok bye now, thanks")  # asked: it runs
    assert goodbye.end.terminated and goodbye.events[0].status is EventStatus.SUCCEEDED


@pytest.mark.parametrize("mode", MODES)
async def test_an_unasked_mute_after_a_reminder_request_is_refused(mode, make_harness):
    def answer(request):
        if isinstance(request.get("tool_choice"), dict):  # dual_agent: the EventAgent proposes the mute
            return Reply(tool_calls=[("adjust_device_volume", json.dumps({"mode": "mute"}))])
        return reply(mode, "Okay!", [(SCHEDULE, "add_schedule", {"title": "feed the cat"}),
                                     (VOLUME, "adjust_device_volume", {"mode": "mute"})])

    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode=mode, llm=server)
        turn = await h.turn(REMIND)
    assert not h.mixer.muted and ("set_muted", True) not in h.mixer.changes
    by_name = {e.name: e for e in turn.events}
    assert by_name[VOLUME].error_code == "not_asked" and by_name[SCHEDULE].status is EventStatus.SUCCEEDED
    assert [a["name"] for a in h.audit.of("event.refused")] == [VOLUME]
    [entry] = await h.calendar.list()
    assert entry.title == "feed the cat"


@pytest.mark.parametrize("mode", MODES)
async def test_an_asked_mute_still_runs(mode, scripted_llm, make_harness):
    scripted_llm.add(reply(mode, "Shh, okay.", [(VOLUME, "adjust_device_volume", {"mode": "mute"})]))
    h = make_harness(mode=mode, llm=scripted_llm)
    await h.turn("please be quiet now, mute yourself")
    assert h.mixer.muted and h.audit.of("event.refused") == []


@pytest.mark.parametrize("words, proposed", [
    ("remind me to feed the cat tomorrow at three", {"frequency": "daily"}),
    ("remind me to feed the cat on Saturday at three", {"frequency": "weekly", "days": ["SA"]}),
])
async def test_a_repeat_rule_the_child_never_said_is_dropped(words, proposed, scripted_llm, make_harness):
    """Only chat_agent_tools proposes arguments with the call (dual_agent's resolver reads the words alone)."""
    args = {"title": "feed the cat", "start_at": "2099-01-01T15:00:00+00:00", "recurrence": proposed}
    scripted_llm.add(Reply(text="Okay!", tool_calls=[("add_schedule", json.dumps(args))]))
    h = make_harness(mode="chat_agent_tools", llm=scripted_llm)
    await h.turn(words)
    [entry] = await h.calendar.list()
    assert entry.recurrence is None  # stored once


async def test_a_repeat_rule_the_child_said_stands(scripted_llm, make_harness):
    args = {"title": "feed the cat", "recurrence": {"frequency": "weekly", "days": ["SA"]}}
    scripted_llm.add(Reply(text="Okay!", tool_calls=[("add_schedule", json.dumps(args))]))
    h = make_harness(mode="chat_agent_tools", llm=scripted_llm)
    await h.turn("remind me to feed the cat on Saturdays at three")
    [entry] = await h.calendar.list()
    assert entry.recurrence == {"frequency": "weekly", "days": ["SA"]}


@pytest.mark.parametrize("mode", MODES)
async def test_a_volume_change_nobody_asked_for_is_refused(mode, scripted_llm, make_harness):
    """The real 1.5B model marked a volume change on "讲个笑话吧" (+10) and on a weather question (level 20): the
    toy's sound must not change when the child did not talk about it (issue 27)."""
    scripted_llm.add(reply(mode, "为什么小猫喜欢晒太阳？因为它想变成热猫！",
                         [(VOLUME, "adjust_device_volume", {"mode": "relative", "delta": 10})]),
                   reply(mode, "好的，大声一点！", [(VOLUME, "adjust_device_volume", {"mode": "relative", "delta": 10})]))
    h = make_harness(mode=mode, llm=scripted_llm)
    level = h.mixer.level
    turn = await h.turn("讲个笑话吧")
    assert h.mixer.level == level and h.mixer.changes == []
    [event] = turn.events
    assert event.error_code == "not_asked"
    assert [a["name"] for a in h.audit.of("event.refused")] == [VOLUME]
    louder = await h.turn("声音大一点")  # asked: it runs
    assert louder.events[0].status is EventStatus.SUCCEEDED and h.mixer.level == level + 10
