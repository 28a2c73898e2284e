"""ChatClient builds its openai client on first use (or `warm()`), through the real SDK to a loopback server."""

from __future__ import annotations

import pytest
import asyncio

from toy_runtime.agent.llm import CallStats, ChatClient, ContentDelta
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer


def _client(url: str) -> ChatClient:
    return ChatClient(base_url=url, api_key=None, connect_timeout_s=1.0, read_timeout_s=2.0)


async def _text(client: ChatClient, **request) -> str:
    parts = []
    messages = [{"role": "user", "content": "hi"}]
    async for item in client.stream(CallStats("chat"), model="scripted-model", messages=messages, **request):
        if isinstance(item, ContentDelta):
            parts.append(item.text)
    return "".join(parts)


async def test_warm_builds_the_client_before_any_request():
    with ScriptedLLMServer(default=Reply(text="Hello!")) as server:
        client = _client(server.url)
        try:
            assert not client.ready
            await client.warm()
            assert client.ready and server.requests == []  # warming sends nothing to the provider
            assert await _text(client) == "Hello!"
        finally:
            await client.aclose()


async def test_concurrent_first_requests_share_one_client():
    with ScriptedLLMServer(default=Reply(text="Same.", delay_s=0.05)) as server:
        client = _client(server.url)
        try:
            built = await asyncio.gather(*(client._connection() for _ in range(3)))
            assert built[0] is built[1] is built[2]
            answers = await asyncio.gather(_text(client), _text(client))
            assert answers == ["Same.", "Same."] and len(server.requests) == 2
            assert client._client is built[0]
        finally:
            await client.aclose()


async def test_building_the_client_is_setup_time_not_the_providers_time_to_first_token():
    with ScriptedLLMServer(default=Reply(text="Quick.")) as server:
        client = _client(server.url)
        try:
            cold = CallStats("chat")
            created = cold.started
            async for _ in client.stream(cold, model="scripted-model", messages=[{"role": "user", "content": "a"}]):
                pass
            assert cold.setup_ms > 0 and cold.as_dict()["setup_ms"] == round(cold.setup_ms, 3)
            assert cold.started - created >= cold.setup_ms / 1000 - 1e-6  # the provider's clock starts after it
            warm = CallStats("chat")
            async for _ in client.stream(warm, model="scripted-model", messages=[{"role": "user", "content": "b"}]):
                pass
            assert warm.setup_ms == 0
        finally:
            await client.aclose()


async def test_closing_a_client_that_never_connected_is_quiet():
    client = _client("http://127.0.0.1:9/v1")
    await client.aclose()
    assert not client.ready


# -- timeouts, stale connections, rejected optional fields --------------------------------------------------


async def _outcome(client: ChatClient, **kw) -> str:
    from toy_runtime.agent.llm import LLMFault

    try:
        return await _text(client, **kw)
    except LLMFault as exc:
        return f"fault:{exc.code}"


def _timed(url: str, *, first: float, read: float) -> ChatClient:
    return ChatClient(base_url=url, api_key=None, connect_timeout_s=1.0, read_timeout_s=read,
                      first_token_timeout_s=first)


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_first_token_and_between_chunk_timeouts_are_separate():
    with ScriptedLLMServer() as server:
        client = _timed(server.url, first=0.4, read=5.0)
        try:
            server.add(Reply(text="never", fault="stall"))
            assert await _outcome(client) == "fault:first_token_timeout"
            server.add(Reply(text="never", fault="hang"))  # not even headers
            assert await _outcome(client) == "fault:first_token_timeout"
        finally:
            await client.aclose()
        client = _timed(server.url, first=5.0, read=0.4)
        try:
            server.add(Reply(text="Hello there, friend.", fault="hang", fault_after_chunks=2))
            assert await _outcome(client) == "fault:timeout"  # the first token came; then the stream stalled
        finally:
            await client.aclose()


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_a_slow_first_token_is_not_a_between_chunk_timeout():
    """A cold prefill longer than the between-chunk timeout is fine while it is within the first-token one."""
    with ScriptedLLMServer(default=Reply(text="Made it.", delay_s=0.6)) as server:
        client = _timed(server.url, first=10.0, read=0.2)
        try:
            assert await _outcome(client) == "Made it."
        finally:
            await client.aclose()


async def test_a_stale_connection_is_retried_once_and_a_dead_server_is_not_retried_twice():
    import socket

    with ScriptedLLMServer() as server:
        server.add(Reply(text="one", fault="close_keepalive"), Reply(text="two"))
        client = _client(server.url)
        try:
            assert [await _outcome(client), await _outcome(client)] == ["one", "two"]
            assert server.dropped == 1 and client.retries == 1 and len(server.requests) == 2
        finally:
            await client.aclose()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = _client(f"http://127.0.0.1:{port}/v1")
    try:
        assert await _outcome(client) == "fault:connect" and client.retries == 1
    finally:
        await client.aclose()


async def test_a_400_that_names_no_optional_field_is_a_fault_not_a_retry():
    with ScriptedLLMServer(default=Reply(text="x", fault="http_400")) as server:
        client = _client(server.url)
        try:
            assert await _outcome(client) == "fault:http_400"
            assert len(server.requests) == 1 and client.unsupported == set()
        finally:
            await client.aclose()


async def test_warm_rehearses_the_stream_in_process_and_survives_an_unreachable_endpoint():
    import openai

    from toy_runtime.agent.llm_warm import rehearse_stream

    await rehearse_stream(openai)  # no server anywhere: httpx's in-process transport answers
    client = _client("http://127.0.0.1:9/v1")  # nothing listens on the discard port: GET /models fails quietly
    try:
        await client.warm()
        assert client.ready
    finally:
        await client.aclose()


async def test_a_request_sent_ahead_is_read_by_the_same_request_and_its_fault_is_the_same_fault():
    """Speculation (agent/prefetch.py): the same request adopts the stream sent ahead (one request on the wire);
    a provider fault inside it surfaces as the fault the live request would have raised."""
    messages = [{"role": "user", "content": "hi"}]
    with ScriptedLLMServer([Reply(text="Hello there!"), Reply(text="nope", fault="http_500")]) as server:
        client = _client(server.url)
        try:
            await client.warm()
            assert await client.prefetch(model="scripted-model", messages=messages)
            assert await _text(client) == "Hello there!"
            assert len(server.requests) == 1 and client.prefetch_hits == 1
            assert await client.prefetch(model="scripted-model", messages=messages)
            assert await _outcome(client) == "fault:http_500"
        finally:
            await client.aclose()


async def test_a_request_sent_ahead_is_not_sent_before_the_client_exists_nor_kept_past_close():
    with ScriptedLLMServer(default=Reply(text="Hi!", delay_s=5.0)) as server:
        client = _client(server.url)
        assert not await client.prefetch(model="scripted-model", messages=[{"role": "user", "content": "hi"}])
        await client.warm()
        reasons: list[str] = []
        assert await client.prefetch(model="scripted-model", messages=[{"role": "user", "content": "hi"}],
                                     on_cancel=reasons.append)
        await client.aclose()
    assert reasons == ["the client closed"] and client.prefetch_cancelled == 1
