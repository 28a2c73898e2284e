"""The scripted Chat Completions server, exercised through the real openai client over loopback HTTP."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import openai
import pytest

from toy_runtime.agent.text_events import EventBlock, TextEventParser, Visible
from toy_runtime.agent.tool_calls import ToolCallAssembler
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer, estimate_tokens
from toy_runtime.testing.scripted_script import load_script

MESSAGES = [{"role": "system", "content": "You are a toy."}, {"role": "user", "content": "Turn it down please"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "device_volume_adjust",
            "description": "Adjust the volume",
            "parameters": {"type": "object", "properties": {"delta": {"type": "integer"}}},
        },
    }
]


def client(server: ScriptedLLMServer, timeout: float = 5.0) -> openai.AsyncOpenAI:
    # max_retries=0: every retry would consume another scripted reply
    return openai.AsyncOpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=timeout)


async def collect(llm: openai.AsyncOpenAI, **kwargs) -> list:
    stream = await llm.chat.completions.create(model="toy-model", messages=MESSAGES, stream=True, **kwargs)
    return [chunk async for chunk in stream]


def content(chunks: list) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def finish_reasons(chunks: list) -> list:
    return [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]


async def test_streams_text_with_a_hidden_event_block():
    text = "Okay, turning it down.<agent_events>device.volume.adjust</agent_events>"
    async with ScriptedLLMServer([Reply(text=text, chunk_size=3)]) as server:
        async with client(server) as llm:
            chunks = await collect(llm)
    assert content(chunks) == text
    assert finish_reasons(chunks) == ["stop"]
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) == -(-len(text) // 3)
    parser = TextEventParser()
    items = [item for c in chunks if c.choices for item in parser.feed(c.choices[0].delta.content or "")]
    items += parser.close()
    assert "".join(i.text for i in items if isinstance(i, Visible)) == "Okay, turning it down."
    assert [i.names for i in items if isinstance(i, EventBlock)] == [("device.volume.adjust",)]
    assert server.requests[0]["messages"] == MESSAGES
    assert server.requests[0]["model"] == "toy-model"


@pytest.mark.parametrize("repeat", [False, True])
async def test_tool_calls_stream_and_usage_chunk(repeat):
    reply = Reply(
        text="Sure!",
        tool_calls=[("device_volume_adjust", {"delta": -20}), ("session_terminate", "")],
        repeat_id_and_name=repeat,
        args_chunk_size=3,
    )
    async with ScriptedLLMServer([reply]) as server:
        async with client(server) as llm:
            chunks = await collect(llm, tools=TOOLS, tool_choice="auto", stream_options={"include_usage": True})
    assembler = ToolCallAssembler()
    completed_at = []
    for n, chunk in enumerate(chunks):
        if chunk.choices:
            for call in assembler.feed(chunk.choices[0].delta.tool_calls):
                completed_at.append((n, call))
    final = assembler.finish()
    calls = [call for _, call in completed_at] + final
    expected = [("device_volume_adjust", {"delta": -20}), ("session_terminate", {})]
    assert [(c.name, c.arguments) for c in calls] == expected
    assert len({c.call_id for c in calls}) == 2
    assert completed_at and completed_at[0][0] < len(chunks) - 2  # first call completed mid-stream, not at the end
    assert content(chunks) == "Sure!"
    assert finish_reasons(chunks) == ["tool_calls"]
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None
    assert usage.prompt_tokens > estimate_tokens(json.dumps(TOOLS))  # tool schemas count toward the prompt
    assert usage.completion_tokens > 0 and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    request = server.requests[0]
    assert request["tools"] == TOOLS and request["tool_choice"] == "auto"
    assert request["stream_options"] == {"include_usage": True}


async def test_tools_first_ordering_and_explicit_usage():
    reply = Reply(text="Done.", tool_calls=[("a_b", "{}")], content_then_tools=False, usage={"prompt_tokens": 111})
    async with ScriptedLLMServer([reply]) as server:
        async with client(server) as llm:
            chunks = await collect(llm, stream_options={"include_usage": True})
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    kinds = ["tool" if d.tool_calls else "text" for d in deltas if d.tool_calls or d.content]
    assert kinds[0] == "tool" and kinds[-1] == "text"
    assert chunks[-1].usage.prompt_tokens == 111


async def test_non_streaming_reply_and_models_endpoint():
    reply = Reply(text="Hi there.", tool_calls=[("a_b", {"x": 1})])
    async with ScriptedLLMServer([reply], model="toy-llm") as server:
        async with client(server) as llm:
            result = await llm.chat.completions.create(model="toy-model", messages=MESSAGES)
            models = await llm.models.list()
    message = result.choices[0].message
    assert message.content == "Hi there."
    assert json.loads(message.tool_calls[0].function.arguments) == {"x": 1}
    assert result.choices[0].finish_reason == "tool_calls"
    assert result.usage.completion_tokens > 0
    assert [m.id for m in models.data] == ["toy-llm"]


async def test_keep_alive_connection_serves_several_requests_and_callable_script():
    def answer(request):
        return Reply(text="tools" if request.get("tools") else "plain")

    async with ScriptedLLMServer(answer) as server:
        async with client(server) as llm:
            first = content(await collect(llm))
            second = content(await collect(llm, tools=TOOLS))
            third = (await llm.chat.completions.create(model="m", messages=MESSAGES)).choices[0].message.content
    assert (first, second, third) == ("plain", "tools", "plain")
    assert len(server.requests) == 3


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_delay_before_first_chunk_is_honoured():
    async with ScriptedLLMServer([Reply(text="Hello.", delay_s=0.3)]) as server:
        async with client(server) as llm:
            start = time.monotonic()
            stream = await llm.chat.completions.create(model="m", messages=MESSAGES, stream=True)
            async for _ in stream:
                break
            assert time.monotonic() - start >= 0.3  # a lower bound only: cannot flake on a slow box
            await stream.close()


async def test_exhausted_script_answers_500_and_records_the_error():
    async with ScriptedLLMServer([Reply(text="one")]) as server:
        async with client(server) as llm:
            await collect(llm)
            with pytest.raises(openai.InternalServerError):
                await collect(llm)
    assert server.errors == ["request 2: no reply left in the script"]


async def test_default_reply_after_queue():
    async with ScriptedLLMServer([Reply(text="one")], default=Reply(text="again")) as server:
        async with client(server) as llm:
            assert [content(await collect(llm)) for _ in range(3)] == ["one", "again", "again"]
    assert server.errors == []


# ---- faults ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    "fault, error, status", [("http_500", openai.InternalServerError, 500), ("http_429", openai.RateLimitError, 429)]
)
async def test_http_errors_raise_api_status_error(fault, error, status, stream):
    async with ScriptedLLMServer([Reply(text="x", fault=fault)]) as server:
        async with client(server) as llm:
            with pytest.raises(error) as info:
                await llm.chat.completions.create(model="m", messages=MESSAGES, stream=stream)
    assert isinstance(info.value, openai.APIStatusError)
    assert info.value.status_code == status


async def test_drop_before_done_ends_without_finish_reason_or_usage():
    reply = Reply(text="Half an answer", fault="drop_before_done", fault_after_chunks=2)
    async with ScriptedLLMServer([reply]) as server:
        async with client(server) as llm:
            chunks = await collect(llm, stream_options={"include_usage": True})
    assert content(chunks) == "Half an "
    assert finish_reasons(chunks) == []
    assert all(c.usage is None for c in chunks)


async def test_disconnect_mid_stream_raises_connection_error():
    async with ScriptedLLMServer([Reply(text="Some words here.", fault="disconnect")]) as server:
        async with client(server) as llm:
            received = []
            with pytest.raises(openai.APIConnectionError):
                stream = await llm.chat.completions.create(model="m", messages=MESSAGES, stream=True)
                async for chunk in stream:
                    received.append(chunk)
    assert received  # the first half arrived before the cut


async def test_empty_stream_yields_no_chunks():
    async with ScriptedLLMServer([Reply(text="never sent", fault="empty_stream")]) as server:
        async with client(server) as llm:
            assert await collect(llm) == []


async def test_no_usage_even_when_asked():
    async with ScriptedLLMServer([Reply(text="Hi.", fault="no_usage")]) as server:
        async with client(server) as llm:
            chunks = await collect(llm, stream_options={"include_usage": True})
    assert content(chunks) == "Hi."
    assert finish_reasons(chunks) == ["stop"]
    assert all(c.usage is None for c in chunks)


async def test_malformed_chunk_raises_a_decode_error():
    async with ScriptedLLMServer([Reply(text="Some words here.", fault="malformed_chunk")]) as server:
        async with client(server) as llm:
            with pytest.raises(ValueError):  # json.JSONDecodeError: the openai client does not wrap it
                await collect(llm)


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
@pytest.mark.timeout(30)
async def test_hang_times_out_and_the_next_request_works():
    async with ScriptedLLMServer([Reply(text="x", fault="hang"), Reply(text="after")]) as server:
        async with client(server, timeout=0.5) as llm:
            with pytest.raises(openai.APITimeoutError):
                await collect(llm)
            assert content(await collect(llm)) == "after"


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
@pytest.mark.timeout(30)
async def test_hang_mid_stream_times_out_after_the_first_chunks():
    reply = Reply(text="abcdefgh", chunk_size=2, fault="hang", fault_after_chunks=2)
    async with ScriptedLLMServer([reply]) as server:
        async with client(server, timeout=0.5) as llm:
            received = []
            with pytest.raises(openai.APITimeoutError):
                stream = await llm.chat.completions.create(model="m", messages=MESSAGES, stream=True)
                async for chunk in stream:
                    received.append(chunk)
    assert content(received) == "abcd"


@pytest.mark.timeout(30)
async def test_close_does_not_wait_for_a_hanging_response():
    server = ScriptedLLMServer([Reply(text="x", fault="hang")]).start()
    llm = client(server, timeout=20)
    request = asyncio.create_task(collect(llm), name="hanging-request")
    while not server.requests:
        await asyncio.sleep(0.01)
    await asyncio.to_thread(server.close)
    with pytest.raises(openai.APIConnectionError):
        await request
    await llm.close()


# ---- sync use, script files, command line ------------------------------------------------------


def test_sync_context_manager_with_sync_client(tmp_path):
    with ScriptedLLMServer([Reply(text="sync ok")]) as server:
        with openai.OpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=5) as llm:
            result = llm.chat.completions.create(model="m", messages=MESSAGES)
    assert result.choices[0].message.content == "sync ok"


SCRIPT = {
    "model": "demo",
    "rules": [
        {"match": "volume", "tools": False, "reply": {"text": "Ok!<agent_events>device.volume.adjust</agent_events>"}},
        {"match": "volume", "tools": True, "reply": {"text": "Ok!", "tool_calls": [
            {"name": "device_volume_adjust", "arguments": {"delta": -10}}]}},
    ],
    "replies": [{"text": "First."}],
    "default": {"text": "Default."},
}


async def test_load_script_rules_queue_and_default(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT))
    async with load_script(path) as server:
        async with client(server) as llm:
            plain = [content(await collect(llm)) for _ in range(2)]
            ask = [{"role": "user", "content": "lower the VOLUME"}]
            stream = await llm.chat.completions.create(model="m", messages=ask, stream=True)
            dual = content([c async for c in stream])
            stream = await llm.chat.completions.create(model="m", messages=ask, stream=True, tools=TOOLS)
            tool_chunks = [c async for c in stream]
    assert plain == ["First.", "Default."]
    assert dual == "Ok!<agent_events>device.volume.adjust</agent_events>"
    assembler = ToolCallAssembler()
    for chunk in tool_chunks:
        assembler.feed(chunk.choices[0].delta.tool_calls if chunk.choices else None)
    assert [(c.name, c.arguments) for c in assembler.finish()] == [("device_volume_adjust", {"delta": -10})]


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
@pytest.mark.timeout(60)
async def test_command_line_serves_a_script_file(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "toy_runtime.testing.scripted_script", "--port", "0", "--script", str(path),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        url = line.strip().rsplit(" ", 1)[-1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        async with openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0, timeout=5) as llm:
            models = await llm.models.list()
            result = await llm.chat.completions.create(model="m", messages=MESSAGES)
        assert [m.id for m in models.data] == ["demo"]
        assert result.choices[0].message.content == "First."
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 10) == 0


def test_reply_validation():
    with pytest.raises(ValueError):
        Reply(fault="explode")
    with pytest.raises(ValueError):
        Reply.from_dict({"txt": "typo"})
    assert Reply(tool_calls=[{"name": "a", "arguments": {"x": 1}}]).tool_calls == (("a", '{"x": 1}'),)


def _post(conn, body: dict) -> tuple[int, bytes]:
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read()


def test_garbage_is_a_200_without_any_sse_event():
    import http.client

    with ScriptedLLMServer([Reply(text="hi", fault="garbage")]) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        status, body = _post(conn, {"model": "m", "messages": MESSAGES, "stream": True})
    assert status == 200 and body and b"data:" not in body


def test_rejected_fields_get_a_400_naming_them_without_consuming_a_reply():
    import http.client

    with ScriptedLLMServer([Reply(text="ok")], reject_fields=("stream_options", "tools")) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        base = {"model": "m", "messages": MESSAGES, "stream": True}
        status, body = _post(conn, {**base, "stream_options": {"include_usage": True}})
        assert status == 400 and json.loads(body)["error"]["param"] == "stream_options"
        status, body = _post(conn, {**base, "tools": TOOLS})
        assert status == 400 and json.loads(body)["error"]["param"] == "tools"
        status, _ = _post(conn, {**base, "tools": TOOLS, "stream": False})  # only streamed tools are refused
        assert status == 200 and server.pending == 0 and len(server.requests) == 3


def test_close_keepalive_drops_the_next_request_on_that_connection_only():
    import http.client

    with ScriptedLLMServer([Reply(text="one", fault="close_keepalive"), Reply(text="two")]) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        base = {"model": "m", "messages": MESSAGES, "stream": False}
        assert _post(conn, base)[0] == 200
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            _post(conn, base)
        fresh = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        status, body = _post(fresh, base)
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "two"
    assert server.dropped == 1


async def test_release_ends_the_first_token_delay():
    import threading

    go = threading.Event()
    with ScriptedLLMServer([Reply(text="now", delay_s=60, release=go)]) as server:
        llm = client(server)
        task = asyncio.create_task(collect(llm))
        await asyncio.sleep(0.05)
        assert not task.done()
        go.set()
        chunks = await asyncio.wait_for(task, timeout=30)
        await llm.close()
    assert content(chunks) == "now"
