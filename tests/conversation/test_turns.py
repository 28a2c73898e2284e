"""End-to-end text turns through the real openai client against the scripted server, in both modes."""

from __future__ import annotations

import json

import pytest

from toy_runtime.agent.prompts import RESULTS_PREFIX
from toy_runtime.events import EventStatus
from toy_runtime.fakes.device import MemoryMixer
from toy_runtime.testing.scripted_llm import Reply
from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

from .conftest import MODES

BLOCK = "<agent_events>{}</agent_events>"


def reply_for(mode, text, events):
    """The same scenario expressed in each protocol: events = [(name, tool_name, args)]."""
    if mode == "dual_agent":
        names = ", ".join(name for name, _, _ in events)
        return Reply(text=text + (BLOCK.format(names) if events else ""), chunk_size=3)
    return Reply(text=text, tool_calls=[(tool, json.dumps(args)) for _, tool, args in events], chunk_size=3)


def is_follow_up(request):
    """The follow-up round: the latest user message is the results message, or tool results follow it."""
    messages = request["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    if str(messages[last_user].get("content", "")).startswith(RESULTS_PREFIX):
        return True
    return any(m["role"] == "tool" for m in messages[last_user:])


@pytest.mark.parametrize("mode", MODES)
async def test_clear_volume_turn_is_one_llm_call_and_silent(mode, scripted_llm, make_harness):
    scripted_llm.add(reply_for(mode, "Okay, setting my volume to thirty!",
                             [("device.volume.adjust", "adjust_device_volume", {"mode": "absolute", "value": 30})]))
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn("set the volume to 30")
    assert turn.end.llm_calls == 1 and len(scripted_llm.requests) == 1
    [event] = turn.events
    assert event.status is EventStatus.SUCCEEDED and dict(event.arguments) == {"mode": "absolute", "value": 30}
    assert turn.speech(answer=2) == []  # silent success: no second answer
    assert (await h.mixer.get()).level == 30
    assert "<agent_events>" not in " ".join(turn.speech()) and "agent_events" not in " ".join(turn.speech())


async def test_direct_mode_history_keeps_the_calls_that_ran_with_their_status_only(scripted_llm, make_harness):
    """chat_agent_tools: the next request shows the earlier turn's call as it ran (the child's 30, not the model's
    80), answered by a status-only tool message, so a small model keeps seeing the form it is asked to write."""
    scripted_llm.add(reply_for("chat_agent_tools", "Okay!",
                             [("device.volume.adjust", "adjust_device_volume", {"mode": "absolute", "value": 80})]),
                   Reply(text="Hi again!"))
    h = make_harness(mode="chat_agent_tools", llm=scripted_llm)
    await h.turn("set the volume to 30")
    await h.turn("hello")
    history = scripted_llm.requests[1]["messages"][1:-1]
    history = [m for m in history if m["role"] != "system"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool"]
    [call] = history[1]["tool_calls"]
    assert history[1]["content"] == "Okay!"
    assert call["function"]["name"] == "adjust_device_volume"
    assert json.loads(call["function"]["arguments"]) == {"mode": "absolute", "value": 30}
    assert history[2] == {"role": "tool", "tool_call_id": call["id"], "content": '{"status": "succeeded"}'}
    assert (await h.mixer.get()).level == 30
    # EventAgent's slice stays what was said
    assert all("tool_calls" not in m for m in h.runner.conversation.slice_for_events())


async def test_modes_send_catalog_or_tools_only(scripted_llm, make_harness):
    scripted_llm.add(Reply(text="Hi!"), Reply(text="Hi!"))
    dual = make_harness(mode="dual_agent", llm=scripted_llm)
    await dual.turn("hello")
    tools = make_harness(mode="chat_agent_tools", llm=scripted_llm)
    await tools.turn("hello")
    dual_request, tools_request = scripted_llm.requests
    assert "tools" not in dual_request or dual_request["tools"] == []
    catalog = [m["content"] for m in dual_request["messages"] if m["role"] == "system"]
    assert any("device.volume.adjust" in c and "<agent_events>" in c for c in catalog)
    names = [t["function"]["name"] for t in tools_request["tools"]]
    assert sorted(names) == sorted(d.tool_name for d in tools.runtime.registry)
    # same persona, history, sampling and budget; only the event instruction differs
    assert dual_request["messages"][0] == tools_request["messages"][0]
    for key in ("temperature", "top_p", "max_tokens", "model"):
        assert dual_request[key] == tools_request[key]


async def test_parity_same_scenario_same_results(scripted_llm, make_harness):
    """Same registry, same normalized arguments, same statuses and policies in both modes."""
    scenario = [("device.volume.adjust", "adjust_device_volume", {"mode": "relative", "delta": 20}),
                ("calendar.schedule.create", "add_schedule", {})]
    outcomes = {}
    for mode in MODES:
        events = scenario if mode == "dual_agent" else [
            scenario[0], ("calendar.schedule.create", "add_schedule", {"title": "brush my teeth"})]
        scripted_llm.add(reply_for(mode, "Sure, louder, and I'll remind you.", events))
        h = make_harness(mode=mode, llm=scripted_llm)
        turn = await h.turn("turn it up by 20 and remind me to brush my teeth in 10 minutes")
        outcomes[mode] = [(e.name, e.status, e.policy, {k: v for k, v in e.arguments.items() if k != "start_at"})
                          for e in turn.events]
        assert turn.end.llm_calls == 1
    assert outcomes["dual_agent"] == outcomes["chat_agent_tools"]
    assert [o[1] for o in outcomes["dual_agent"]] == [EventStatus.SUCCEEDED] * 2


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
@pytest.mark.parametrize("mode", MODES)
async def test_multiple_events_execute_concurrently(mode, scripted_llm, make_harness):
    from toy_runtime.fakes.search import StaticSearch

    search = StaticSearch(delay_s=0.4)
    scripted_llm.add(reply_for(mode, "Turning it up and checking!", [
        ("knowledge.web.search", "web_search", {"query": "dinosaur facts"}),
        ("device.volume.adjust", "adjust_device_volume", {"mode": "relative", "delta": 10}),
    ]))
    scripted_llm.add(Reply(text="I checked: dinosaurs lived long ago."))
    h = make_harness(mode=mode, llm=scripted_llm, search=search)
    turn = await h.turn("louder please, and look up dinosaur facts")
    names = [e.name for e in turn.events]
    assert names == ["device.volume.adjust", "knowledge.web.search"]  # volume finished while search ran
    search_result = next(e for e in turn.events if e.name == "knowledge.web.search")
    volume_result = next(e for e in turn.events if e.name == "device.volume.adjust")
    assert volume_result.timings.total_ms < search_result.timings.total_ms


@pytest.mark.parametrize("mode", MODES)
async def test_terminate_farewell_then_siblings_then_end_without_second_call(mode, scripted_llm, make_harness):
    scripted_llm.add(reply_for(mode, "Bye bye, see you soon!", [
        ("session.terminate", "terminate_session", {}),
        ("device.volume.adjust", "adjust_device_volume", {"mode": "mute"}),
    ]))
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn("mute yourself and goodbye")
    assert turn.speech(answer=1) == ["Bye bye, see you soon!"]
    statuses = {e.name: e.status for e in turn.events}
    assert statuses == {"session.terminate": EventStatus.SUCCEEDED, "device.volume.adjust": EventStatus.SUCCEEDED}
    assert [e.name for e in turn.events] == ["device.volume.adjust", "session.terminate"]  # sibling first
    assert turn.end.terminated and turn.end.llm_calls == 1 and len(scripted_llm.requests) == 1
    assert (await h.mixer.get()).muted


@pytest.mark.parametrize("mode", MODES)
async def test_volume_failure_gives_corrective_line(mode, scripted_llm, make_harness):
    from toy_runtime.fakes.device import MemoryMixer
    from toy_runtime.ports.device import MixerError

    scripted_llm.add(reply_for(mode, "Okay, quieter!",
                             [("device.volume.adjust", "adjust_device_volume", {"mode": "relative", "delta": -10})]))
    h = make_harness(mode=mode, llm=scripted_llm, mixer=MemoryMixer(error=MixerError("busy", "mixer is busy")))
    turn = await h.turn("quieter please")
    [event] = turn.events
    assert event.status is EventStatus.FAILED
    [line] = turn.speech(answer=2)
    assert "volume" in line.lower()
    assert turn.end.llm_calls == 1


@pytest.mark.parametrize("mode", MODES)
async def test_schedule_confirmation_is_deterministic(mode, scripted_llm, make_harness):
    scripted_llm.add(reply_for(mode, "Sure, I'll remember that.", [
        ("calendar.schedule.create", "add_schedule", {"title": "feed the cat"})]))
    h = make_harness(mode=mode, llm=scripted_llm)
    turn = await h.turn("remind me to feed the cat in 10 minutes")
    [event] = turn.events
    assert event.status is EventStatus.SUCCEEDED
    [confirmation] = turn.speech(answer=2)
    assert "feed the cat" in confirmation
    assert turn.end.llm_calls == 1 and len(scripted_llm.requests) == 1
    assert len(await h.calendar.list()) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_vague_schedule_asks_one_question_and_creates_nothing(mode, scripted_llm, make_harness):
    def answer(request):
        if request.get("tool_choice") not in (None, "auto", "none"):
            return Reply(tool_calls=[("add_schedule", json.dumps({"title": "go to the park"}))])
        return reply_for(mode, "Okay!", [("calendar.schedule.create", "add_schedule", {"title": "go to the park"})])

    h = make_harness(mode=mode, base_url="http://unused")
    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode=mode, llm=server)
        turn = await h.turn("remind me to go to the park tomorrow night")
    [event] = turn.events
    assert event.status is EventStatus.NEEDS_CLARIFICATION
    assert turn.speech(answer=2) and turn.speech(answer=2)[0].endswith("?")
    assert await h.calendar.list() == []


@pytest.mark.parametrize("mode", MODES)
async def test_search_gives_first_answer_then_one_grounded_second_answer(mode, make_harness):
    from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

    def answer(request):
        if is_follow_up(request):
            return Reply(text="I just checked: the tallest dinosaur was Sauroposeidon.")
        return reply_for(mode, "Ooh, good question, let me check.", [
            ("knowledge.web.search", "web_search", {"query": "tallest dinosaur"})])

    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode=mode, llm=server)
        turn = await h.turn("what was the tallest dinosaur?")
        first, second = server.requests
    assert " ".join(turn.speech(answer=1)) == "Ooh, good question, let me check."
    assert " ".join(turn.speech(answer=2)) == "I just checked: the tallest dinosaur was Sauroposeidon."
    follow_line = next(s for s in turn.speech_items if s.answer == 2)
    assert follow_line.sources and follow_line.sources[0]["url"].startswith("http")
    assert turn.end.llm_calls == 2
    if mode == "dual_agent":
        assert not second.get("tools")
        assert not any(m["role"] == "tool" or m.get("tool_calls") for m in second["messages"])
        assert sum(str(m.get("content", "")).startswith(RESULTS_PREFIX) for m in second["messages"]) == 1
        catalog = [m for m in second["messages"] if m["role"] == "system" and "agent_events" in m["content"]]
        assert catalog == []  # the follow-up round cannot request events
    else:
        assert second["tool_choice"] == "none"
        assert any(m["role"] == "tool" for m in second["messages"])
    # history keeps what was said and the mode's record of which events ran, never the results
    history = h.runner.conversation.messages
    if mode == "dual_agent":
        assert not any(m.get("tool_calls") or m["role"] == "tool" for m in history)
        assert history[-1]["content"].endswith("<agent_events>knowledge.web.search</agent_events>")
    else:
        user, assistant, tool = history
        [call] = assistant["tool_calls"]
        assert call["function"]["name"] == "web_search" and json.loads(call["function"]["arguments"])["query"]
        assert tool == {"role": "tool", "tool_call_id": call["id"], "content": '{"status": "succeeded"}'}
    assert not any(str(m.get("content")).startswith(RESULTS_PREFIX) for m in history)


@pytest.mark.parametrize("mode", MODES)
async def test_search_failure_gets_a_truthful_line_and_no_follow_up(mode, make_harness):
    """No evidence, no follow-up: the model is not asked to talk about a search that did not happen."""
    from toy_runtime.fakes.search import StaticSearch
    from toy_runtime.ports.search import SearchError
    from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

    def answer(request):
        if is_follow_up(request):
            return Reply(text="I just looked it up: it is sunny!")  # what must never be said
        return reply_for(mode, "Let me look.", [("knowledge.web.search", "web_search", {"query": "weather"})])

    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode=mode, llm=server, search=StaticSearch(fail_always=SearchError("down")))
        turn = await h.turn("what's the weather today?")
        assert server.errors == [] and len(server.requests) == 1
    assert turn.events[0].status is EventStatus.FAILED
    assert turn.speech(answer=1) == ["Let me look."]
    assert " ".join(turn.speech(answer=2)) == "Sorry, I couldn't look that up just now."
    assert turn.end.llm_calls == 1


async def test_follow_up_cannot_trigger_events(make_harness):
    from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

    def answer(request):
        if is_follow_up(request):  # e.g. injected by a search result
            return Reply(text="Found it!<agent_events>device.volume.adjust, session.terminate</agent_events>")
        return reply_for("dual_agent", "Checking.", [("knowledge.web.search", "web_search", {})])

    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode="dual_agent", llm=server)
        turn = await h.turn("search for loud music")
    assert [e.name for e in turn.events] == ["knowledge.web.search"]
    assert not turn.end.terminated and h.mixer.calls == []
    assert h.audit.of("event.ignored")


async def test_unknown_unclosed_and_stray_markup_never_spoken_or_run(scripted_llm, make_harness):
    scripted_llm.add(Reply(text="3 < 5 is true!<agent_events>device.explode, device.volume.adjust</agent_events>",
                         chunk_size=1))
    scripted_llm.add(Reply(text="Sure thing.<agent_events>session.terminate", chunk_size=2))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    first = await h.turn("turn it up a bit")
    assert first.speech(answer=1) == ["3 less than 5 is true!"]  # a comparison is said in words, never as a sign
    assert [e.name for e in first.events] == ["device.volume.adjust"]
    assert first.metrics["dropped_events"] == ["device.explode"]
    assert first.speech(answer=2) == ["Hmm, I couldn't do that just now."]  # no promise left standing
    second = await h.turn("ok")
    # the unclosed block never runs; the definition's own failure line says so
    assert second.speech() == ["Sure thing.", "Sorry, I couldn't end our chat just now."]
    assert second.events == [] and not second.end.terminated
    assert h.audit.of("chat.unclosed_event_block")


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_event_dispatched_before_reply_ends(scripted_llm, make_harness):
    """The block closes early; slow text after it must not delay the event."""
    scripted_llm.add(Reply(text="Okay!<agent_events>device.volume.adjust</agent_events> And here is a long story "
                              "about a dragon who liked music very much.", chunk_size=4, chunk_delay_s=0.02))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    turn = await h.turn("set the volume to 40")
    event_index = next(i for i, item in enumerate(turn.items) if hasattr(item, "result"))
    last_speech = max(i for i, item in enumerate(turn.items) if hasattr(item, "answer") and item.answer == 1)
    assert event_index < last_speech
    assert turn.metrics["dispatch_delay_ms_max"] < 50  # target ≤ 5 ms; bound loose for a noisy box


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_tool_call_dispatched_before_stream_ends(scripted_llm, make_harness):
    scripted_llm.add(Reply(text="Okay!", tool_calls=[
        ("adjust_device_volume", json.dumps({"mode": "absolute", "value": 20})),
        ("web_search", json.dumps({"query": "a very long query about many things " * 3})),
    ], chunk_delay_s=0.01, repeat_id_and_name=True))
    scripted_llm.add(Reply(text="Checked."))
    h = make_harness(mode="chat_agent_tools", llm=scripted_llm)
    turn = await h.turn("volume 20 and search")
    volume = next(e for e in turn.events if e.name == "device.volume.adjust")
    assert volume.status is EventStatus.SUCCEEDED and volume.arguments["value"] == 20


async def test_malformed_tool_arguments_fall_back_not_crash(make_harness):
    from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

    def answer(request):
        tool_choice = request.get("tool_choice")
        if isinstance(tool_choice, dict):  # EventAgent's forced named call
            assert [t["function"]["name"] for t in request["tools"]] == ["adjust_device_volume"]
            assert request["max_tokens"] <= 200
            return Reply(tool_calls=[("adjust_device_volume", json.dumps({"mode": "relative", "delta": 10}))])
        return Reply(text="Okay!", tool_calls=[("adjust_device_volume", '{"mode": "abs')])

    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode="chat_agent_tools", llm=server)
        turn = await h.turn("change the volume")
    [event] = turn.events
    assert event.status is EventStatus.SUCCEEDED and event.resolution.value == "llm_fallback"
    assert turn.metrics["event_agent"]["calls"] == 1 and turn.end.llm_calls == 2


async def test_event_agent_fallback_in_dual_mode_sees_only_its_schema(make_harness):
    from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

    def answer(request):
        if isinstance(request.get("tool_choice"), dict):
            system = request["messages"][0]["content"]
            assert "device.volume.adjust" in system and "calendar" not in system
            return Reply(tool_calls=[("adjust_device_volume", json.dumps({"mode": "unmute"}))])
        return Reply(text="Okay!<agent_events>device.volume.adjust</agent_events>")

    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode="dual_agent", llm=server)
        turn = await h.turn("do the volume thing")
        assert len(server.requests) == 2
    assert turn.events[0].arguments == {"mode": "unmute"} and turn.events[0].fallback_used


@pytest.mark.parametrize("fault", ["http_500", "garbage", "disconnect"])
async def test_an_event_agent_failure_inside_a_turn_fails_the_event_truthfully(fault, make_harness):
    """dual_agent marks a volume change the words cannot resolve; EventAgent, asked for the arguments, fails.
    The turn still ends, the event is failed (never run with guessed arguments), the failure is audited, nothing
    spoken promises the change, and the next turn works."""
    def answer(request):
        if isinstance(request.get("tool_choice"), dict):  # EventAgent's forced named call
            return Reply(fault=fault)
        if "again" in json.dumps(request["messages"][-1]):
            return Reply(text="Hello again!")
        return Reply(text="Let me try.<agent_events>device.volume.adjust</agent_events>")

    mixer = MemoryMixer()
    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode="dual_agent", llm=server, mixer=mixer)
        level = mixer.level
        turn = await h.turn("do the volume thing")
        [event] = turn.events
        assert event.fallback_used
        assert mixer.level == level  # nothing ran on invented arguments
        assert turn.metrics["event_agent"]["calls"] == 1
        [fallback] = h.audit.of("event.fallback")
        # the call is a stream (so an abandoned one stops a local server): a body of garbage holds no SSE chunk
        assert fault.replace("garbage", "empty_stream").replace("disconnect", "") in json.dumps(fallback), fallback
        # the child is asked, not told it happened
        assert event.status is EventStatus.NEEDS_CLARIFICATION, event.status
        assert turn.speech()[1:] and "?" in turn.speech()[1], turn.speech()
        again = await h.turn("hello again")
    assert again.speech() == ["Hello again!"]


async def test_event_agent_asks_the_configured_event_model(make_harness):
    """`[llm] event_model` sends EventAgent's fallback to a smaller model; ChatAgent keeps `model`."""
    models: dict[str, str] = {}

    def answer(request):
        if isinstance(request.get("tool_choice"), dict):
            models["event_agent"] = request["model"]
            return Reply(tool_calls=[("adjust_device_volume", json.dumps({"mode": "unmute"}))])
        models["chat"] = request["model"]
        return Reply(text="Okay!<agent_events>device.volume.adjust</agent_events>")

    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode="dual_agent", llm=server, event_model="tiny-event-model")
        turn = await h.turn("do the volume thing")
    assert turn.events[0].fallback_used and turn.events[0].status is EventStatus.SUCCEEDED
    assert models == {"chat": "scripted-model", "event_agent": "tiny-event-model"}


@pytest.mark.parametrize("fault", ["http_500", "drop_before_done", "empty_stream",
                                   pytest.param("hang", marks=pytest.mark.slow),  # waits out the real read timeout
                                   "malformed_chunk", "disconnect"])
async def test_provider_faults_speak_fallback_and_next_turn_works(fault, scripted_llm, make_harness):
    scripted_llm.add(Reply(text="This will break partway through.", fault=fault, fault_after_chunks=2),
                   Reply(text="I'm fine now."))
    # the hang case waits the read timeout out; it is generous so that the good turn never hits it on a busy machine
    h = make_harness(mode="dual_agent", llm=scripted_llm, read_timeout_s=3.0)
    broken = await h.turn("hello")
    assert " ".join(broken.speech()).endswith(h.runtime.settings.agent.fault_line)
    assert broken.metrics["fault"] is not None
    assert h.audit.of("llm.fault")
    ok = await h.turn("hello again")
    assert ok.speech() == ["I'm fine now."] and ok.metrics["fault"] is None, (h.audit.of("llm.fault"),
                                                                                 scripted_llm.errors)


async def test_missing_usage_is_estimated_and_audited(scripted_llm, make_harness):
    scripted_llm.add(Reply(text="Hello there!", fault="no_usage"))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    turn = await h.turn("hi")
    assert turn.speech() == ["Hello there!"]
    first = turn.metrics["first_answer"]
    assert first["usage_source"] == "estimate" and first["prompt_tokens"] > 0
    assert h.audit.of("llm.usage_missing")


async def test_provider_usage_is_reported(scripted_llm, make_harness):
    scripted_llm.add(Reply(text="Hello there!", usage={"prompt_tokens": 123, "completion_tokens": 7}))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    turn = await h.turn("hi")
    first = turn.metrics["first_answer"]
    assert (first["prompt_tokens"], first["completion_tokens"], first["usage_source"]) == (123, 7, "provider")
    assert first["ttft_ms"] is not None and turn.metrics["total_ms"] >= first["ttft_ms"]


async def test_offline_gate_without_endpoint(make_harness):
    h = make_harness(mode="dual_agent", base_url=None)
    turn = await h.turn("set the volume to 30")
    assert turn.end.llm_calls == 0 and turn.metrics["path"] == "gate"
    assert turn.events[0].status is EventStatus.SUCCEEDED and (await h.mixer.get()).level == 30
    assert turn.speech(answer=1)  # a templated reply
    chat = await h.turn("tell me a story about a dragon")
    assert " ".join(chat.speech()) == h.runtime.settings.agent.offline_line and chat.events == []
    bye = await h.turn("goodbye")
    assert bye.end.terminated


async def test_offline_gate_when_endpoint_unreachable(make_harness):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    h = make_harness(mode="chat_agent_tools", base_url=f"http://127.0.0.1:{port}/v1")
    turn = await h.turn("mute")
    assert turn.metrics["path"] == "gate" and turn.metrics["fault"] == "connect"
    assert (await h.mixer.get()).muted


async def test_gate_shortcut_skips_the_llm_for_clear_requests(scripted_llm, make_harness):
    scripted_llm.add(Reply(text="should not be used"))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    h.runner.config = h.runner.config.model_copy(update={"gate_shortcut": True})
    turn = await h.turn("unmute")
    assert scripted_llm.requests == [] and turn.metrics["path"] == "gate"
    assert turn.events[0].arguments == {"mode": "unmute"}


async def test_deterministic_lines_follow_the_childs_language(make_harness):
    h = make_harness(mode="dual_agent", base_url=None)
    turn = await h.turn("把音量调到30")
    assert turn.speech(answer=1) == ["好的，音量调到30。"]
    bye = await h.turn("再见")
    assert bye.speech(answer=1) == ["拜拜，下次再聊！"] and bye.end.terminated


async def test_chinese_schedule_confirmation(scripted_llm, make_harness):
    scripted_llm.add(Reply(text="好的！<agent_events>calendar.schedule.create</agent_events>"))
    h = make_harness(mode="dual_agent", llm=scripted_llm)
    turn = await h.turn("十分钟后提醒我喝水")
    [event] = turn.events
    assert event.status is EventStatus.SUCCEEDED
    [line] = turn.speech(answer=2)
    assert line.startswith("好的，") and "提醒你" in line


async def test_event_agent_derives_a_focused_query_from_history(make_harness):
    from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

    seen = {}

    def answer(request):
        if isinstance(request.get("tool_choice"), dict):
            seen["event_agent"] = request["messages"]
            return Reply(tool_calls=[("web_search", json.dumps({"query": "weather in Paris tomorrow"}))])
        if is_follow_up(request):
            return Reply(text="I checked: tomorrow in Paris will be rainy.")
        return Reply(text="Let me check.<agent_events>knowledge.web.search</agent_events>")

    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode="dual_agent", llm=server)
        first = await h.turn("what's the weather in Paris today?")
        second = await h.turn("and what about tomorrow?")
    assert first.events[0].arguments["query"].lower().startswith("the weather in paris")  # self-contained: no LLM
    assert first.metrics["event_agent"]["calls"] == 0
    assert second.events[0].arguments["query"] == "weather in Paris tomorrow"
    assert second.events[0].resolution.value == "llm_fallback"
    history_text = json.dumps(seen["event_agent"])
    assert "Paris" in history_text  # EventAgent saw the minimal history slice


async def test_a_silent_tool_call_is_sent_back_with_text_content_never_null(make_harness):
    """chat_agent_tools, the model calls a tool and says nothing: the follow-up (and the next turn's history) carry
    the assistant message with content "" — llama-cpp-python's request model refuses null there with HTTP 500, which
    cost the issue-27 real-model run its follow-up answers."""
    def answer(request):
        if is_follow_up(request):
            return Reply(text="It is sunny there.")
        if "thanks" in json.dumps(request["messages"][-1]):
            return Reply(text="You're welcome!")
        return Reply(text="", tool_calls=[("web_search", json.dumps({"query": "weather in Beijing"}))])

    with ScriptedLLMTransport(answer) as server:
        h = make_harness(mode="chat_agent_tools", llm=server)
        await h.turn("what's the weather in Beijing?")
        await h.turn("thanks")
        requests = server.requests
    carried = [m for r in requests for m in r["messages"] if m.get("tool_calls")]
    assert len(requests) == 3 and len(carried) >= 2, requests  # the follow-up and the next turn's history
    assert all(isinstance(m.get("content"), str) for m in carried), carried
    assert carried[0]["content"] == ""  # the follow-up: the model said nothing before its call
