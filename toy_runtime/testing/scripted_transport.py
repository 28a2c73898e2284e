"""The scripted LLM without a socket: an `httpx.MockTransport` that plays the same scripts as the loopback server.

    llm = ScriptedLLMTransport([Reply(text="Hi!")])
    client = ChatClient(base_url=llm.url, api_key=None, ..., transport=llm.transport)
    llm.requests[-1]["messages"]                                        # every request body, in order

The script (`scripted_queue.ReplyScript`: a queue, a responder, a default, `reject_fields`) and the wire format
(`scripted_wire.Plan`: SSE `data: {...}` chunks, the finish chunk, usage, `data: [DONE]`) are the server's own, and
each fault ends the way the wire ends it, as the httpx error the SDK would meet there: a dropped connection is
`httpx.RemoteProtocolError`, a silence longer than the request's read timeout `httpx.ReadTimeout`, a keep-alive
connection the server expired drops the next request unanswered. `tests/agent/test_llm_contract.py` plays each
case on both and compares what `ChatClient` makes of them, so this cannot drift from the wire.

Conversation tests use it through the `scripted_llm` fixture; tests of the wire itself (sockets, keep-alive, TLS,
the SDK's HTTP client) keep the loopback server. So does a test whose responder blocks (waits on a
`threading.Event` for another request): here the responder runs on the event loop, and blocking it blocks the test.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, Iterable, Mapping

import httpx

from ..errors import ToyError
from .scripted_queue import ReplyScript, Responder
from .scripted_reply import REJECTIONS, Reply
from .scripted_wire import Plan

__all__ = ["ScriptedLLMTransport"]

_SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
_POLL_S = 0.005  # how often a held answer looks at its release event and the closing flag


class ScriptedLLMTransport(ReplyScript):
    """A scripted Chat Completions endpoint served in-process through `transport` (see the module docstring)."""

    url = "http://scripted-llm.invalid/v1"  # never resolved: the transport answers every request itself

    def __init__(
        self,
        script: Iterable[Reply | Mapping[str, Any]] | Responder | None = None,
        *,
        default: Reply | None = None,
        model: str = "scripted-model",
        reject_fields: Iterable[str] = (),
    ) -> None:
        super().__init__(script, default=default, model=model, reject_fields=reject_fields)
        self.transport = httpx.MockTransport(self._handle)
        self._expired = False  # "close_keepalive": the next request meets a connection the server closed

    # the loopback server's lifecycle, so a test (or a fixture) can use either the same way
    def start(self) -> "ScriptedLLMTransport":
        self._stopping.clear()
        return self

    def close(self) -> None:
        """Wake held answers (they end as a dropped connection). Idempotent."""
        self._stopping.set()

    def __enter__(self) -> "ScriptedLLMTransport":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "ScriptedLLMTransport":
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # ---- routes ---------------------------------------------------------------------------------

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.rstrip("/")
        if request.method == "GET" and path in ("/v1/models", "/models"):
            data = [{"id": self.model, "object": "model", "created": 0, "owned_by": "scripted"}]
            return httpx.Response(200, json={"object": "list", "data": data})
        if request.method != "POST" or path not in ("/v1/chat/completions", "/chat/completions"):
            return _error(404, f"no route {request.method} {request.url.path}", "not_found_error")
        try:
            body = json.loads(request.content or b"null")
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            return _error(400, f"invalid JSON body: {exc}", "invalid_request_error")
        if self._expired:  # the server closed the pooled connection this request went out on
            self._expired = False
            self._count_dropped(body)
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        rejected = self._rejected_field(body)
        if rejected is not None:
            param, message, status = REJECTIONS.get(rejected, (rejected, f"Unsupported param: {rejected} (scripted)",
                                                               400))
            return _error(status, message, "invalid_request_error", param=param)
        number, reply = self._next_reply(body)
        if reply is None:
            return _error(500, "scripted_llm: no reply left in the script", "server_error")
        if reply.fault == "close_keepalive":
            self._expired = True
        plan = Plan(reply, body, number, self.model)
        read_timeout = (request.extensions.get("timeout") or {}).get("read")
        if reply.fault == "http_429":
            return _error(429, "Rate limit reached (scripted)", "rate_limit_error", headers={"Retry-After": "1"})
        if reply.fault == "http_400":
            return _error(400, "This model's maximum context length was exceeded (scripted)", "invalid_request_error")
        if reply.fault == "http_500":
            return _error(500, "The server had an error (scripted)", "server_error")
        if reply.fault == "garbage":
            return httpx.Response(200, headers=_SSE_HEADERS, content=b"<html><body><h1>502 Bad Gateway</h1>upstream"
                                  b" went away</body></html>\n")
        if body.get("stream"):
            if reply.fault == "hang" and reply.fault_after_chunks is None:
                await self._hold(request, read_timeout)  # no headers, ever
            return httpx.Response(200, headers=_SSE_HEADERS, stream=_Body(self._stream(plan, body, request,
                                                                                        read_timeout)))
        return await self._whole(plan, request, read_timeout)

    # ---- responses ------------------------------------------------------------------------------

    async def _stream(self, plan: Plan, body: Mapping[str, Any], request: httpx.Request,
                      read_timeout: float | None) -> AsyncIterator[bytes]:
        """The SSE body, chunk by chunk, as `scripted_http.ScriptedHandler._stream` writes it."""
        reply = plan.reply
        include_usage = bool((body.get("stream_options") or {}).get("include_usage")) and reply.fault != "no_usage"
        deltas = plan.deltas()
        fault_at = reply.fault_after_chunks
        if fault_at is None:
            fault_at = len(deltas) // 2 if reply.fault in ("disconnect", "malformed_chunk") else len(deltas)
        if reply.fault == "empty_stream":
            return
        if reply.fault == "stall":  # headers, then silence; released, the server hangs up mid-body
            await self._hold(request, read_timeout, reply.release)
            raise _dropped(request)
        await self._pause(reply.delay_s, request, read_timeout, reply.release)
        yield plan.chunk({"role": "assistant", "content": ""}, with_usage=include_usage)
        for n, delta in enumerate(deltas):
            if n == fault_at:
                broken = await self._stream_fault(reply.fault, request, read_timeout)
                if broken is not None:
                    yield broken
            await self._pause(reply.chunk_delay_s, request, read_timeout)
            yield plan.chunk(delta, with_usage=include_usage)
        if len(deltas) <= fault_at:
            broken = await self._stream_fault(reply.fault, request, read_timeout)
            if broken is not None:
                yield broken
        await self._pause(reply.chunk_delay_s, request, read_timeout)
        yield plan.chunk({}, plan.finish_reason, with_usage=include_usage)
        if include_usage:
            yield plan.usage_chunk()
        yield b"data: [DONE]\n\n"

    async def _stream_fault(self, fault: str | None, request: httpx.Request,
                            read_timeout: float | None) -> bytes | None:
        """A mid-stream fault at its point: raises where the body ends; the broken line for "malformed_chunk"."""
        if fault == "drop_before_done":
            raise _EndOfBody
        if fault == "disconnect":
            raise _dropped(request)
        if fault == "hang":
            await self._hold(request, read_timeout)
            raise _dropped(request)
        if fault == "malformed_chunk":
            return b"data: {\"id\": \"chatcmpl-broken\", \"choices\": [\n\n"
        return None

    async def _whole(self, plan: Plan, request: httpx.Request, read_timeout: float | None) -> httpx.Response:
        fault = plan.reply.fault
        if fault in ("hang", "stall"):
            await self._hold(request, read_timeout, plan.reply.release)
            raise _dropped(request)
        await self._pause(plan.reply.delay_s, request, read_timeout, plan.reply.release)
        data = json.dumps(plan.completion(with_usage=fault != "no_usage"), ensure_ascii=False).encode()
        if fault == "empty_stream":
            data = b""
        elif fault == "malformed_chunk":
            data = data[: len(data) // 2]
        headers = {"content-type": "application/json", "content-length": str(len(data))}
        if fault in ("drop_before_done", "disconnect"):  # fewer bytes than Content-Length promised
            return httpx.Response(200, headers=headers, stream=_Body(_cut(data[: len(data) // 2], request)))
        return httpx.Response(200, headers=headers, content=data)

    # ---- waiting --------------------------------------------------------------------------------

    async def _pause(self, seconds: float, request: httpx.Request, read_timeout: float | None,
                     release: Any = None) -> None:
        """Wait `seconds` (less if `release` is set); a wait past the read timeout is httpx's `ReadTimeout`."""
        if seconds <= 0 or (release is not None and release.is_set()):
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        timeout_at = None if read_timeout is None else loop.time() + read_timeout
        while (now := loop.time()) < deadline:
            if timeout_at is not None and now >= timeout_at:
                raise httpx.ReadTimeout("timed out (scripted)", request=request)
            if self._stopping.is_set():
                raise _dropped(request)
            if release is not None and release.is_set():
                return
            await asyncio.sleep(min(_POLL_S, deadline - now))

    async def _hold(self, request: httpx.Request, read_timeout: float | None, release: Any = None) -> None:
        """Send nothing until `release` is set; a reader that gives up first (its timeout, or cancelled) is counted
        in `abandoned`, as the server counts a client that closed its end."""
        try:
            await self._pause(float("inf"), request, read_timeout, release)
        except (asyncio.CancelledError, httpx.ReadTimeout):
            self._count_abandoned()
            raise


class _EndOfBody(ToyError):
    """The body ends here, cleanly (a stream that simply stops)."""

    code = "scripted_body_end"


class _Body(httpx.AsyncByteStream):
    """A response body from an async generator; `_EndOfBody` ends it cleanly, closing the generator on close."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._chunks:
                yield chunk
        except _EndOfBody:
            return

    async def aclose(self) -> None:
        await self._chunks.aclose()  # type: ignore[attr-defined]  # an async generator


async def _cut(data: bytes, request: httpx.Request) -> AsyncIterator[bytes]:
    yield data
    raise _dropped(request)


def _dropped(request: httpx.Request) -> httpx.RemoteProtocolError:
    return httpx.RemoteProtocolError("peer closed connection without sending complete message body (scripted)",
                                     request=request)


def _error(status: int, message: str, kind: str, *, headers: Mapping[str, str] | None = None,
           param: str | None = None) -> httpx.Response:
    return httpx.Response(status, headers=headers,
                          json={"error": {"message": message, "type": kind, "param": param, "code": None}})
