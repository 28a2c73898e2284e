"""EventAgent's answer form on servers that refuse or ignore a forced named tool_choice (the scripted LLM in-process;
the abandoned-call test on real loopback HTTP)."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

import pytest

from toy_runtime.agent.event_agent import EventAgent
from toy_runtime.agent.llm import ChatClient
from toy_runtime.events import ResolveContext
from toy_runtime.fakes.device import MemoryMixer
from toy_runtime.plugins import device_volume
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer
from toy_runtime.testing.scripted_transport import ScriptedLLMTransport

DEFINITION = device_volume.definition(MemoryMixer())
CONTEXT = ResolveContext(utterance="make it a bit louder", request_time=datetime(2025, 1, 1, 12, tzinfo=timezone.utc),
                         timezone="UTC")
ARGUMENTS = {"mode": "relative", "delta": 10}


def local_server(*, honours: tuple[str, ...]):
    """A responder for a server that answers in the forms named in `honours` and in prose otherwise (the way
    llama-server treats an ignored tool_choice: "auto", and a small model then talks instead of calling)."""

    def answer(request: dict[str, Any]) -> Reply:
        choice, fmt = request.get("tool_choice"), request.get("response_format") or {}
        form = ("named" if isinstance(choice, dict) else "required" if choice == "required"
                else fmt.get("type") if fmt else "plain")
        if form not in honours:
            return Reply(text="Sure, I will make it louder for you!")
        if form in ("named", "required"):
            return Reply(tool_calls=[(DEFINITION.tool_name, json.dumps(ARGUMENTS))])
        return Reply(text=json.dumps(ARGUMENTS))

    return answer


def forms(requests: list[dict[str, Any]]) -> list[str]:
    out = []
    for request in requests:
        choice, fmt = request.get("tool_choice"), request.get("response_format")
        out.append("named" if isinstance(choice, dict) else choice if choice else fmt["type"] if fmt else "plain")
    return out


async def propose_once(server: ScriptedLLMTransport, context: ResolveContext = CONTEXT) -> Any:
    """One EventAgent answer for the volume's missing delta from `server`, on a client closed afterwards."""
    client = ChatClient(base_url=server.url, api_key=None, connect_timeout_s=2, read_timeout_s=5,
                        transport=server.transport)
    try:
        return await EventAgent(client, model="scripted-model", max_tokens=60).propose(
            DEFINITION, None, ("delta",), context)
    finally:
        await client.aclose()


async def propose_twice(server: ScriptedLLMTransport) -> tuple[EventAgent, list[Any]]:
    client = ChatClient(base_url=server.url, api_key=None, connect_timeout_s=2, read_timeout_s=5,
                        transport=server.transport)
    agent = EventAgent(client, model="scripted-model", max_tokens=60)
    try:
        answers = [await agent.propose(DEFINITION, None, ("delta",), CONTEXT) for _ in range(2)]
    finally:
        await client.aclose()
    return agent, answers


async def test_a_server_that_honours_the_named_form_gets_only_that():
    with ScriptedLLMTransport(local_server(honours=("named",))) as server:
        agent, answers = await propose_twice(server)
        requests = server.requests
    assert [a.arguments for a in answers] == [ARGUMENTS, ARGUMENTS]
    assert forms(requests) == ["named", "named"] and agent.form == "named"


async def test_a_rejected_named_object_falls_back_to_required_once(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="toy_runtime.agent.event_agent")
    with ScriptedLLMTransport(local_server(honours=("named", "required")),
                           reject_fields=("tool_choice_object",)) as server:
        agent, answers = await propose_twice(server)
        requests = server.requests
    assert [a.arguments for a in answers] == [ARGUMENTS, ARGUMENTS] and all(a.error is None for a in answers)
    # the first call learns it (400, then "required"); the second asks in the remembered form straight away
    assert forms(requests) == ["named", "required", "required"] and agent.form == "required"
    assert requests[1]["tools"][0]["function"]["name"] == DEFINITION.tool_name and len(requests[1]["tools"]) == 1
    assert sum("'required' form from now on" in r.getMessage() for r in caplog.records) == 1


async def test_a_silently_ignored_named_object_falls_back_to_required():
    # llama-server: the object is logged as "must be string" and replaced by "auto"; the model answers in prose
    with ScriptedLLMTransport(local_server(honours=("required",))) as server:
        agent, answers = await propose_twice(server)
        requests = server.requests
    assert [a.arguments for a in answers] == [ARGUMENTS, ARGUMENTS]
    assert forms(requests) == ["named", "required", "required"] and agent.form == "required"


async def test_no_tool_choice_form_at_all_ends_in_a_json_schema_answer():
    with ScriptedLLMTransport(local_server(honours=("json_schema",)),
                           reject_fields=("tool_choice_object", "tool_choice_required")) as server:
        agent, answers = await propose_twice(server)
        requests = server.requests
    assert [a.arguments for a in answers] == [ARGUMENTS, ARGUMENTS]
    assert forms(requests) == ["named", "required", "json_schema", "json_schema"] and agent.form == "json_schema"
    json_request = requests[-1]
    assert "tools" not in json_request and "tool_choice" not in json_request
    assert json_request["response_format"]["json_schema"]["schema"] == dict(DEFINITION.schema)
    assert '"delta"' in json_request["messages"][0]["content"]  # the schema is in the prompt: no tool carries it


async def test_json_object_with_schema_is_the_last_form():
    with ScriptedLLMTransport(local_server(honours=("json_object",)),
                           reject_fields=("tool_choice_object", "response_format_json_schema")) as server:
        agent, answers = await propose_twice(server)
        requests = server.requests
    assert [a.arguments for a in answers] == [ARGUMENTS, ARGUMENTS]
    assert forms(requests) == ["named", "required", "json_schema", "json_object", "json_object"]
    assert requests[-1]["response_format"] == {"type": "json_object", "schema": dict(DEFINITION.schema)}


async def test_a_server_that_honours_nothing_ends_in_an_error_not_a_loop():
    with ScriptedLLMTransport(local_server(honours=())) as server:
        agent, answers = await propose_twice(server)
        requests = server.requests
    assert all(a.arguments is None and a.error == "no tool call in the EventAgent answer" for a in answers)
    assert forms(requests) == ["named", "required", "json_schema", "json_object", "json_object"]
    assert agent.form == "json_object" and agent.total == len(requests)  # every call is counted


async def test_an_unrelated_400_is_an_error_not_a_step_down():
    with ScriptedLLMTransport([Reply(fault="http_400")]) as server:
        agent, answers = await propose_twice(server)
    assert answers[0].arguments is None and "http_400" in (answers[0].error or "")
    assert agent.form == "named"


async def test_a_call_written_as_text_in_a_tool_form_is_taken_as_the_answer():
    """llama-cpp-python ignores "required" on the GGUF's own template and the model writes the call as text."""
    text_call = "```json\n" + json.dumps({"name": DEFINITION.tool_name, "arguments": ARGUMENTS}) + "\n```"
    with ScriptedLLMTransport([Reply(text=text_call)] * 2, reject_fields=("tool_choice_object",)) as server:
        agent, answers = await propose_twice(server)
        requests = server.requests
    assert [a.arguments for a in answers] == [ARGUMENTS, ARGUMENTS]
    assert forms(requests) == ["named", "required", "required"] and agent.form == "required"


async def test_a_server_error_naming_response_format_steps_down_too():
    """llama-cpp-python answers a json_schema response_format with HTTP 500 and a validation error naming it."""
    with ScriptedLLMTransport(local_server(honours=("json_object",)),
                           reject_fields=("tool_choice_object", "response_format_json_schema_500")) as server:
        agent, answers = await propose_twice(server)
        requests = server.requests
    assert [a.arguments for a in answers] == [ARGUMENTS, ARGUMENTS] and agent.form == "json_object"
    assert forms(requests) == ["named", "required", "json_schema", "json_object", "json_object"]


async def test_the_event_agent_sees_only_the_last_two_history_messages():
    """Guards the history slice in EventAgent.build_request (`HISTORY_SLICE`): the EventAgent gets the schema and
    the last user/assistant pair only — older turns must not reach it (cost, and stale values it could copy)."""
    history = [{"role": "user", "content": "set it to 80 earlier"}, {"role": "assistant", "content": "Done, 80."},
               {"role": "user", "content": "what is the volume?"}, {"role": "assistant", "content": "It is 40."}]
    context = ResolveContext(utterance=CONTEXT.utterance, request_time=CONTEXT.request_time, timezone="UTC",
                             history=history)
    with ScriptedLLMTransport(local_server(honours=("named",))) as server:
        answer = await propose_once(server, context)
        requests = server.requests
    assert answer.arguments == ARGUMENTS and len(requests) == 1
    messages = requests[0]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1:3] == history[2:]


async def test_the_event_agent_streams_so_an_abandoned_call_stops_the_server():
    """A local server stops generating when a stream's reader goes away, but finishes a plain request whose caller
    left (llama-cpp-python): a fallback call abandoned at the batch deadline kept the one-slot server busy into the
    child's next turn (issue 27). So the call is a stream, and giving up on it closes it."""
    import asyncio
    import threading

    release = threading.Event()
    try:
        async with ScriptedLLMServer(default=Reply(text="{}", fault="stall", release=release)) as server:
            client = ChatClient(base_url=server.url, api_key=None, connect_timeout_s=2, read_timeout_s=30,
                                first_token_timeout_s=30)
            agent = EventAgent(client, model="scripted-model", max_tokens=60)
            call = asyncio.create_task(agent.propose(DEFINITION, None, ("delta",), CONTEXT), name="fallback-call")
            while not server.requests:  # the request reached the server, which now holds its answer
                await asyncio.sleep(0.01)
            call.cancel()  # the batch deadline
            with pytest.raises(asyncio.CancelledError):
                await call
            await client.aclose()
            for _ in range(500):  # event-driven: the server notices the closed connection within its 50 ms poll
                if server.abandoned:
                    break
                await asyncio.sleep(0.02)
            assert server.requests[0]["stream"] is True
            assert server.abandoned == 1
    finally:
        release.set()


async def test_a_tool_call_streamed_in_pieces_is_put_back_together():
    def answer(request: dict[str, Any]) -> Reply:
        return Reply(tool_calls=[(DEFINITION.tool_name, json.dumps(ARGUMENTS))], args_chunk_size=3)

    async with ScriptedLLMTransport(answer) as server:
        answer_ = await propose_once(server)
    assert answer_.arguments == ARGUMENTS and answer_.error is None
