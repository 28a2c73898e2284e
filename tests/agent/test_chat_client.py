"""ChatClient builds its openai client on first use (or `warm()`), through the real SDK to a loopback server."""

from __future__ import annotations

import asyncio

from toy_runtime.agent.llm import CallStats, ChatClient, ContentDelta
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer


def _client(url: str) -> ChatClient:
    return ChatClient(base_url=url, api_key=None, connect_timeout_s=1.0, read_timeout_s=2.0)


async def _text(client: ChatClient) -> str:
    parts = []
    messages = [{"role": "user", "content": "hi"}]
    async for item in client.stream(CallStats("chat"), model="scripted-model", messages=messages):
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
