"""Warming the openai SDK's streaming path without the network (see `ChatClient.warm`)."""

from __future__ import annotations

from typing import Any

__all__ = ["rehearse_stream"]

_REHEARSAL_SSE = (
    b'data: {"id":"w","object":"chat.completion.chunk","created":0,"model":"w","choices":[{"index":0,'
    b'"delta":{"role":"assistant","content":"Hi","tool_calls":[{"index":0,"id":"c","type":"function",'
    b'"function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}\n\n'
    b'data: {"id":"w","object":"chat.completion.chunk","created":0,"model":"w","choices":[{"index":0,"delta":{},'
    b'"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)


async def rehearse_stream(openai: Any) -> None:
    """One streamed chat completion through the SDK's whole path (request transform, SSE, chunk models) against
    httpx's in-process MockTransport."""
    import httpx

    transport = httpx.MockTransport(lambda request: httpx.Response(
        200, content=_REHEARSAL_SSE, headers={"content-type": "text/event-stream"}))
    async with httpx.AsyncClient(transport=transport) as http:
        client = openai.AsyncOpenAI(base_url="http://rehearsal.invalid/v1", api_key="none", max_retries=0,
                                    http_client=http)
        stream = await client.chat.completions.create(
            model="w", messages=[{"role": "user", "content": "hi"}], stream=True,
            stream_options={"include_usage": True})
        async for _chunk in stream:
            pass
