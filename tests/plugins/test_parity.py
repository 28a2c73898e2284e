"""Every built-in through EventKernel.run_batch: the same statuses and continuation in both invocation modes."""

import pytest

from toy_runtime.events import EventKernel, EventStatus, SourceProtocol
from toy_runtime.fakes import memory_ports
from toy_runtime.plugins import builtin_definitions, default_registry
from toy_runtime.fakes.clock import ManualClock

from .helpers import SH_NOW, request, run

CONFIRM = "OK, I'll remind you to brush your teeth on Tuesday, December 1 at 7:00 AM."
CASES = [
    # (event name, tool name, proposed args, utterance, status, lines, terminate, follow-up count)
    ("session.terminate", "terminate_session", None, "bye bye", EventStatus.SUCCEEDED, (), True, 0),
    ("device.volume.adjust", "adjust_device_volume", {"mode": "absolute", "value": 30}, "set the volume to 30",
     EventStatus.SUCCEEDED, (), False, 0),
    ("device.volume.adjust", "adjust_device_volume", None, "把音量调到一百五十", EventStatus.REJECTED,
     ("I can only set the volume from 0 to 100.",), False, 0),
    ("device.volume.adjust", "adjust_device_volume", None, "change the volume", EventStatus.NEEDS_CLARIFICATION,
     ("How loud should I be? Say a number from 0 to 100, or louder/quieter.",), False, 0),
    ("calendar.schedule.create", "add_schedule", None, "remind me to brush my teeth tomorrow at 7 am",
     EventStatus.SUCCEEDED, (CONFIRM,), False, 0),
    ("calendar.schedule.create", "add_schedule", None, "明天早上7点提醒我刷牙", EventStatus.SUCCEEDED,
     ("好的，12月1日 上午7:00 提醒你：刷牙。",), False, 0),
    ("calendar.schedule.create", "add_schedule", None, "remind me to brush my teeth tomorrow night",
     EventStatus.NEEDS_CLARIFICATION, ("What time tomorrow night should I remind you?",), False, 0),
    ("knowledge.web.search", "web_search", None, "帮我查一下熊猫吃什么", EventStatus.SUCCEEDED, (), False, 1),
]


def _kernel():
    return EventKernel(default_registry(memory_ports(clock=ManualClock(SH_NOW))))


@pytest.mark.parametrize("name, tool, args, utterance, status, lines, terminate, follow_ups", CASES)
async def test_each_plugin_same_in_both_modes(name, tool, args, utterance, status, lines, terminate, follow_ups):
    outcomes = []
    for event_name, source in ((name, SourceProtocol.TEXT_EVENTS), (tool, SourceProtocol.TOOL_CALLS)):
        outcome = await run(_kernel(), request(event_name, args, source=source), utterance=utterance)
        outcomes.append(outcome)
        result = outcome.results[0]
        assert result.name == name and result.status is status, result
        assert outcome.continuation.lines == lines
        assert outcome.continuation.terminate is terminate
        assert len(outcome.continuation.follow_up) == follow_ups
    text, tools = outcomes
    assert text.results[0].arguments == tools.results[0].arguments


async def test_mixed_batch_confirmations_first_one_follow_up():
    outcome = await run(
        _kernel(),
        request("adjust_device_volume", {"mode": "relative", "delta": -20}, source=SourceProtocol.TOOL_CALLS),
        request("add_schedule", {"title": "brush my teeth", "start_at": "2026-12-01T07:00:00+08:00"},
                source=SourceProtocol.TOOL_CALLS),
        request("web_search", {"query": "panda diet"}, source=SourceProtocol.TOOL_CALLS),
        request("web_search", {"query": "panda  diet"}, source=SourceProtocol.TOOL_CALLS),  # duplicate once tidied
        utterance="turn the sound down by 20 and remind me to brush my teeth tomorrow at 7 am",  # words for each
    )
    assert [r.status for r in outcome.results] == [EventStatus.SUCCEEDED, EventStatus.SUCCEEDED,
                                                   EventStatus.SUCCEEDED, EventStatus.SKIPPED_DUPLICATE]
    assert outcome.continuation.lines == (CONFIRM,)
    assert [r.name for r in outcome.continuation.follow_up] == ["knowledge.web.search"]


async def test_terminate_in_a_batch_suppresses_the_follow_up_but_not_siblings():
    ports = memory_ports(clock=ManualClock(SH_NOW))
    kernel = EventKernel(default_registry(ports))
    outcome = await run(
        kernel,
        request("session.terminate"),
        request("calendar.schedule.create", {"title": "brush my teeth", "start_at": "2026-12-01T07:00:00+08:00"}),
        request("knowledge.web.search", {"query": "panda"}),
        utterance="remind me tomorrow at 7 am and look it up, then goodbye",
    )
    assert all(r.status is EventStatus.SUCCEEDED for r in outcome.results)
    assert outcome.continuation.terminate and outcome.continuation.follow_up == ()
    assert outcome.continuation.lines == (CONFIRM,)
    assert len(await ports.calendar.list()) == 1 and ports.session.ended == 1


def test_catalog_and_provider_tools():
    definitions = builtin_definitions(memory_ports())
    assert [d.name for d in definitions] == ["session.terminate", "device.volume.adjust", "calendar.schedule.create",
                                             "knowledge.web.search"]
    registry = default_registry(memory_ports())
    tools = registry.provider_tools()
    assert [t["function"]["name"] for t in tools] == ["terminate_session", "adjust_device_volume", "add_schedule",
                                                      "web_search"]
    assert all(t["function"]["parameters"]["type"] == "object" and t["function"]["description"] for t in tools)
    assert len(registry.catalog_lines()) == 4


def test_every_public_thing_has_a_docstring():
    import inspect

    import toy_runtime.fakes as fakes
    from toy_runtime import plugins
    from toy_runtime.fakes import calendar, device, search
    from toy_runtime.plugins import (calendar_schedule, device_volume, numbers, session_terminate, text,
                                     timeparse, web_search)

    modules = [plugins, fakes, calendar, device, search, calendar_schedule, device_volume, numbers,
               session_terminate, text, timeparse, web_search]
    missing = []
    for module in modules:
        assert module.__doc__, module.__name__
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(obj) or inspect.isclass(obj):
                if not obj.__doc__:
                    missing.append(f"{module.__name__}.{name}")
                if inspect.isclass(obj):
                    missing += [f"{module.__name__}.{name}.{m}" for m, f in vars(obj).items()
                                if not m.startswith("_") and inspect.isfunction(f) and not f.__doc__]
    assert missing == []


WRONG_PROPOSALS = [
    # (event, tool, utterance, what a model proposed, status, arguments both modes must end with)
    ("device.volume.adjust", "adjust_device_volume", "set the volume to 30", {"mode": "absolute", "value": 80},
     EventStatus.SUCCEEDED, {"mode": "absolute", "value": 30}),
    ("device.volume.adjust", "adjust_device_volume", "把音量调到30", {"mode": "relative", "delta": 30},
     EventStatus.SUCCEEDED, {"mode": "absolute", "value": 30}),
    ("calendar.schedule.create", "add_schedule", "remind me to brush my teeth at 5 pm tomorrow",
     {"title": "Brush teeth", "start_at": "2026-12-01T07:00:00+08:00"}, EventStatus.SUCCEEDED,
     {"title": "brush my teeth", "start_at": "2026-12-01T17:00:00+08:00", "timezone": "Asia/Shanghai"}),
    ("calendar.schedule.create", "add_schedule", "remind me to water the plants",
     {"title": "water the plants", "start_at": "2026-12-01T07:00:00+08:00"}, EventStatus.NEEDS_CLARIFICATION,
     {"title": "water the plants", "timezone": "Asia/Shanghai"}),
]


@pytest.mark.parametrize("name, tool, utterance, proposed, status, arguments", WRONG_PROPOSALS)
async def test_a_wrong_proposal_changes_nothing(name, tool, utterance, proposed, status, arguments):
    """dual_agent (no arguments) and chat_agent_tools (a model's wrong arguments) end the same way."""
    text = await run(_kernel(), request(name, None, source=SourceProtocol.TEXT_EVENTS), utterance=utterance)
    tools = await run(_kernel(), request(tool, proposed, source=SourceProtocol.TOOL_CALLS), utterance=utterance)
    for outcome in (text, tools):
        assert outcome.results[0].status is status and dict(outcome.results[0].arguments) == arguments
    assert text.continuation.lines == tools.continuation.lines
