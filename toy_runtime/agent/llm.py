"""A thin streaming client over `openai.AsyncOpenAI` that turns provider behaviour into typed items and faults.

Provider faults (connect, first-token and between-chunk timeouts, HTTP errors, a stream that ends without a finish
reason or without any chunk) become `LLMFault` with a stable code, so the turn can fall back to the offline gate
and the next turn still works. Two provider habits are absorbed instead of surfacing as faults: a reused
keep-alive connection that the server already closed is retried once (only while nothing was received), and a
server that rejects `stream_options` or streamed `tools` with HTTP 400 is asked again without that field, which is
then left out for the rest of the process (one warning in the log).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import ssl
import time
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Sequence

from ..language import TOKEN_ESTIMATOR, estimate_tokens  # noqa: F401 - TOKEN_ESTIMATOR: named in bench reports
# the port's values, re-exported: the agent and its callers have always named them here
from ..ports.llm import (CallStats, ChatStream, Collected, ContentDelta, LLMFault, StreamItem,  # noqa: F401
                         ToolCallDeltas)
from .prefetch import PrefetchedStream, request_key

if TYPE_CHECKING:
    import httpx


def estimate_prompt_tokens(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> int:
    """Estimate prompt tokens of a request: message texts + serialized tool schemas."""
    total = 0
    for message in messages:
        total += 4 + estimate_tokens(str(message.get("content") or ""))
        if message.get("tool_calls"):
            total += estimate_tokens(json.dumps(message["tool_calls"], ensure_ascii=False))
    if tools:
        total += estimate_tokens(json.dumps(list(tools), ensure_ascii=False))
    return total


log = logging.getLogger(__name__)

# Fields some OpenAI-compatible servers reject with HTTP 400; each is dropped (and remembered) when named in the error.
OPTIONAL_FIELDS = ("stream_options", "tools")


class ChatClient:
    """Streaming Chat Completions against any OpenAI-compatible endpoint (no SDK retries: latency first).

    The openai SDK is imported on first use, or ahead of it by `warm()`: importing it costs ~0.7-1 s of
    interpreter time (it builds thousands of pydantic models), which `toy-runtime run` spends after it is already
    listening instead of before.

    Timeouts: `first_token_timeout_s` bounds the wait from the request to the first content or tool-call delta
    (a local CPU model spends most of it in prompt prefill); `read_timeout_s` bounds each wait between chunks after
    that. Both run as asyncio timeouts around the stream; httpx's own read timeout (applied per socket read) is set
    to the larger of the two and only backs them up.

    `transport`: the httpx transport the SDK's HTTP client sends through; None is httpx's own (the network). The
    tests pass an in-process one (`testing/scripted_transport.py`, an `httpx.MockTransport`) that plays the same
    scripts as the loopback server, so a conversation test needs no socket.
    """

    def __init__(self, *, base_url: str, api_key: str | None, connect_timeout_s: float, read_timeout_s: float,
                 first_token_timeout_s: float | None = None, include_usage: bool = True,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url
        self._transport = transport
        self.include_usage = include_usage
        self._api_key = api_key or "not-needed"
        self._connect_timeout_s = connect_timeout_s
        self._read_timeout_s = read_timeout_s
        self._first_token_timeout_s = first_token_timeout_s if first_token_timeout_s is not None else read_timeout_s
        self.unsupported: set[str] = set()  # request fields this server rejected (OPTIONAL_FIELDS); never sent again
        self.retries = 0  # stale keep-alive connections retried (for audits and tests)
        self._openai: Any = None
        self._client: Any = None
        self._opening: asyncio.Lock | None = None
        self._told_unreachable = False  # the owner hears "cannot connect" once per outage, not once per turn
        self._prefetch: PrefetchedStream | None = None  # a request sent ahead of its turn (agent/prefetch.py)
        self.prefetches = 0  # speculative requests sent
        self.prefetch_hits = 0  # …adopted by the turn that asked the same
        self.prefetch_cancelled = 0  # …cancelled unread (the child went on, or said something else)

    @property
    def ready(self) -> bool:
        """True once the SDK is imported and the HTTP client exists."""
        return self._client is not None

    async def warm(self) -> None:
        """Import the SDK in a worker thread and build the client now, so the first turn does not wait for it;
        then run one streamed request through the SDK against an in-process transport (no network, nothing sent
        to the provider): the SDK builds its response models lazily on the first stream (~60-150 ms measured on
        the first turn of every process), which is paid here instead. Last, `GET /models` on the endpoint opens
        the keep-alive connection (its answer, even an error, does not matter)."""
        client = await self._connection()
        try:
            from .llm_warm import rehearse_stream

            await rehearse_stream(self._openai)
        except Exception as exc:  # a warm-up must never stop the runtime; the first turn just pays for it
            log.debug("LLM stream rehearsal failed: %s", exc)
        try:
            await client.models.list(timeout=self._connect_timeout_s)
        except self._openai.APIConnectionError as exc:  # nothing listens there: the owner should know why
            self._tell_unreachable(exc)
        except Exception as exc:  # no /models, or it answered an error: the first turn connects itself
            log.debug("LLM pre-connect failed: %s", exc)

    def _tell_unreachable(self, exc: Exception) -> None:
        """One warning line per outage: a dead endpoint otherwise only shows as offline answers."""
        if not self._told_unreachable:
            self._told_unreachable = True
            log.warning("cannot connect to %s (%s); offline answers until it answers",
                        self.base_url, _short(str(exc.__cause__ or exc), 120))

    async def _connection_for(self, stats: CallStats) -> Any:
        """The client; when it had to be built first, that time is `stats.setup_ms` and the provider's clock
        (`stats.started`) starts after it."""
        if self._client is not None:
            return self._client
        began = time.perf_counter()
        client = await self._connection()
        stats.setup_ms += (time.perf_counter() - began) * 1000
        stats.started = time.perf_counter()
        return client

    async def _connection(self) -> Any:
        if self._client is not None:
            return self._client
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._client is None:
                await asyncio.to_thread(_import_sdk)  # the import runs off the event loop
                import httpx
                import openai

                self._openai = openai
                read = max(self._read_timeout_s, self._first_token_timeout_s)  # a backstop: see the class doc
                http_client: Any  # httpx2's (the SDK's own) or httpx's: the SDK takes either
                if self._transport is None:
                    tls = await asyncio.to_thread(tls_context)  # the first one reads the CA bundle: off the loop too
                    http_client = openai.DefaultAsyncHttpxClient(verify=tls)
                elif isinstance(self._transport, httpx.AsyncBaseTransport):  # the SDK takes an httpx client too
                    http_client = httpx.AsyncClient(transport=self._transport)
                else:  # a transport of the SDK's own HTTP library (httpx2)
                    http_client = openai.DefaultAsyncHttpxClient(transport=self._transport)
                self._client = openai.AsyncOpenAI(
                    base_url=self.base_url,
                    api_key=self._api_key,
                    max_retries=0,
                    http_client=http_client,
                    # openai's stubs name only httpx2.Timeout; it normalizes an httpx.Timeout (normalize_httpx_timeout)
                    timeout=httpx.Timeout(connect=self._connect_timeout_s, read=read,  # type: ignore[arg-type]
                                          write=read, pool=self._connect_timeout_s),
                )
        return self._client

    async def prefetch(self, *, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                       tool_choice: Any = None, sampling: dict[str, Any] | None = None,
                       on_cancel: Callable[[str], None] | None = None) -> bool:
        """Send this request now, ahead of its turn: a `stream()` of the very same request reads it instead of
        asking again (agent/prefetch.py). Replaces an earlier one. False when the client is not built yet (the
        SDK import belongs to the first real call) or the provider is known to be unreachable. `on_cancel(why)`
        hears it if it is cancelled unread."""
        await self.cancel_prefetch("replaced by a newer one")
        if self._client is None or self._told_unreachable:
            return False
        client = self._client
        self._prefetch = PrefetchedStream(self._request(model, messages, tools, tool_choice, sampling),
                                          lambda request: self._open(client, request), on_cancel=on_cancel)
        self.prefetches += 1
        return True

    async def cancel_prefetch(self, reason: str) -> bool:
        """Cancel the request sent ahead, unread (True if there was one)."""
        prefetched, self._prefetch = self._prefetch, None
        if prefetched is None:
            return False
        self.prefetch_cancelled += 1
        await prefetched.cancel(reason)
        return True

    async def _adopt(self, request: dict[str, Any]) -> PrefetchedStream | None:
        """The request sent ahead if it is this one; any other is cancelled (its turn never came)."""
        prefetched = self._prefetch
        if prefetched is not None and prefetched.key == request_key(request):
            self._prefetch = None
            self.prefetch_hits += 1
            return prefetched
        await self.cancel_prefetch("the turn asked for other words")
        return None

    async def aclose(self) -> None:
        await self.cancel_prefetch("the client closed")
        if self._client is not None:
            await self._client.close()

    def _request(self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 tool_choice: Any, sampling: dict[str, Any] | None) -> dict[str, Any]:
        request: dict[str, Any] = {"model": model, "messages": messages, "stream": True, **(sampling or {})}
        if tools and "tools" not in self.unsupported:
            request["tools"] = tools
            if tool_choice is not None:
                request["tool_choice"] = tool_choice
        if self.include_usage and "stream_options" not in self.unsupported:
            request["stream_options"] = {"include_usage": True}
        return request

    async def _open(self, client: Any, request: dict[str, Any]) -> Any:
        """Send the request and return the SDK stream once headers arrived, absorbing a stale keep-alive connection
        (retried once) and a 400 that names an optional field (asked again without it)."""
        stale_retried = False
        while True:
            try:
                return await client.chat.completions.create(**request)
            except self._openai.APITimeoutError:
                raise
            except self._openai.APIConnectionError as exc:
                # nothing was received yet: a pooled connection the server had closed looks exactly like this
                if stale_retried:
                    raise
                stale_retried = True
                self.retries += 1
                log.debug("retrying once after a connection error before any response: %s", exc.__cause__ or exc)
            except self._openai.APIStatusError as exc:
                field = _rejected_field(exc, request) if exc.status_code == 400 else None
                if field is None:
                    raise
                self._forget(field, exc)
                request.pop(field, None)
                if field == "tools":
                    request.pop("tool_choice", None)

    def _forget(self, field: str, exc: Exception) -> None:
        if field not in self.unsupported:
            self.unsupported.add(field)
            log.warning("%s rejected `%s` (HTTP 400: %s); sending requests without it from now on",
                        self.base_url, field, _short(str(getattr(exc, "message", exc)), 120))

    async def stream(self, stats: CallStats, *, model: str, messages: list[dict[str, Any]],
                     tools: list[dict[str, Any]] | None = None, tool_choice: Any = None,
                     sampling: dict[str, Any] | None = None) -> AsyncIterator[StreamItem]:
        """Yield content and tool-call deltas; fill `stats`; raise LLMFault on any provider fault."""
        request = self._request(model, messages, tools, tool_choice, sampling)
        completion_text: list[str] = []
        saw_chunk = saw_token = False
        client = await self._connection_for(stats)
        prefetched = await self._adopt(request)
        loop = asyncio.get_running_loop()
        first_token_by = loop.time() + self._first_token_timeout_s
        try:
            stream: Any
            if prefetched is not None:  # sent during the end-of-turn wait: read what came meanwhile, then the rest
                stats.prefetched_ms = (stats.started - prefetched.sent_at) * 1000
                stream, chunks = prefetched, prefetched.chunks()
            else:
                async with asyncio.timeout_at(first_token_by):
                    stream = await self._open(client, request)
                chunks = stream
            try:
                iterator = chunks.__aiter__()
                while True:
                    # the timeout wraps only the wait for the next chunk, never the consumer's work between yields
                    limit = first_token_by if not saw_token else loop.time() + self._read_timeout_s
                    try:
                        async with asyncio.timeout_at(limit):
                            chunk = await iterator.__anext__()
                    except StopAsyncIteration:
                        break
                    now = time.perf_counter()
                    if not saw_chunk:
                        saw_chunk = True
                        stats.first_chunk_at = now
                    if chunk.usage is not None:
                        stats.prompt_tokens = chunk.usage.prompt_tokens or 0
                        stats.completion_tokens = chunk.usage.completion_tokens or 0
                        stats.usage_source = "provider"
                    for choice in chunk.choices or ():
                        delta = choice.delta
                        if delta is not None and delta.content:
                            saw_token = True
                            if stats.first_content_at is None:
                                stats.first_content_at = now
                            completion_text.append(delta.content)
                            yield ContentDelta(delta.content)
                        if delta is not None and delta.tool_calls:
                            saw_token = True
                            if stats.first_tool_call_at is None:
                                stats.first_tool_call_at = now
                            completion_text.append(json.dumps([tc.model_dump() for tc in delta.tool_calls]))
                            yield ToolCallDeltas(tuple(delta.tool_calls))
                        if choice.finish_reason:
                            saw_token = True  # an empty answer has finished: what follows is a normal read
                            stats.finish_reason = choice.finish_reason
            finally:
                await stream.close()
        except TimeoutError:
            if saw_token:
                raise self._fault(stats, "timeout", f"no chunk for {self._read_timeout_s:g} s") from None
            raise self._fault(stats, "first_token_timeout",
                              f"no first token within {self._first_token_timeout_s:g} s") from None
        except self._openai.APITimeoutError as exc:
            raise self._fault(stats, "timeout", str(exc) or "the provider stopped answering") from None
        except self._openai.APIConnectionError as exc:
            # refused before anything came back = unreachable; after = a broken stream
            code = "disconnect" if saw_chunk else "connect"
            if code == "connect":
                self._tell_unreachable(exc)
            raise self._fault(stats, code, str(exc.__cause__ or exc)) from None
        except self._openai.APIStatusError as exc:
            raise self._fault(stats, f"http_{exc.status_code}", _short(exc.message)) from None
        except self._openai.APIError as exc:  # e.g. an error event inside the stream
            raise self._fault(stats, "protocol", _short(str(exc))) from None
        except (ValueError, KeyError) as exc:  # an unparseable chunk
            raise self._fault(stats, "protocol", _short(str(exc))) from None
        finally:
            stats.finished_at = time.perf_counter()
            if stats.usage_source != "provider":
                stats.prompt_tokens = estimate_prompt_tokens(messages, tools)
                stats.completion_tokens = estimate_tokens("".join(completion_text))
        self._told_unreachable = False  # it answered: a later outage is news again
        if not saw_chunk:
            raise self._fault(stats, "empty_stream", "the stream ended without any chunk")
        if stats.finish_reason is None:
            raise self._fault(stats, "truncated", "the stream ended without a finish reason ([DONE] missing)")

    async def collect(self, stats: CallStats, *, model: str, messages: list[dict[str, Any]],
                      tools: list[dict[str, Any]] | None = None, tool_choice: Any = None,
                      **sampling: Any) -> Collected:
        """One request streamed and put back together (EventAgent), with the stream's timeouts and faults.

        Streamed, not a plain request, because a local server (llama-cpp-python, llama-server) stops generating
        when a stream's reader goes away but finishes a plain request whose caller left: a fallback call abandoned
        at the batch deadline would keep a one-slot CPU server busy into the child's next turn (issue 27)."""
        text: list[str] = []
        calls: dict[int, list[str]] = {}  # stream index → [name, arguments text]
        async for item in self.stream(stats, model=model, messages=messages, tools=tools, tool_choice=tool_choice,
                                      sampling=sampling):
            if isinstance(item, ContentDelta):
                text.append(item.text)
                continue
            for delta in item.deltas:
                call = calls.setdefault(getattr(delta, "index", None) or 0, ["", ""])
                function = getattr(delta, "function", None)
                if function is not None:
                    call[0] = function.name or call[0]  # the name comes once; some servers repeat it
                    call[1] += function.arguments or ""
        return Collected("".join(text), tuple((name, arguments) for name, arguments in
                                              (calls[i] for i in sorted(calls))))

    async def complete(self, stats: CallStats, **request: Any) -> Any:
        """One non-streaming request (EventAgent); faults become LLMFault. A stale keep-alive connection is retried
        once, like a stream."""
        client = await self._connection_for(stats)
        try:
            response = await self._open(client, {**request, "stream": False})
        except self._openai.APITimeoutError as exc:
            raise self._fault(stats, "timeout", str(exc)) from None
        except self._openai.APIConnectionError as exc:
            raise self._fault(stats, "connect", str(exc.__cause__ or exc)) from None
        except self._openai.APIStatusError as exc:
            raise self._fault(stats, f"http_{exc.status_code}", _short(exc.message)) from None
        except (self._openai.APIError, ValueError) as exc:
            raise self._fault(stats, "protocol", _short(str(exc))) from None
        finally:
            stats.finished_at = time.perf_counter()
        if not hasattr(response, "choices"):
            # a 200 whose body is no completion (a proxy's HTML page): the SDK hands back the text as it is
            raise self._fault(stats, "protocol", "the answer is not a chat completion: "
                              + _short(str(response), 80))
        if response.usage is not None:
            stats.prompt_tokens = response.usage.prompt_tokens or 0
            stats.completion_tokens = response.usage.completion_tokens or 0
            stats.usage_source = "provider"
        else:
            stats.prompt_tokens = estimate_prompt_tokens(request.get("messages", []), request.get("tools"))
            try:
                message = response.choices[0].message
                produced = (message.content or "") + json.dumps(
                    [call.model_dump() for call in (message.tool_calls or [])])
            except (AttributeError, IndexError):
                produced = ""
            stats.completion_tokens = estimate_tokens(produced)
        return response

    @staticmethod
    def _fault(stats: CallStats, code: str, message: str) -> LLMFault:
        stats.fault = code
        return LLMFault(code, message)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One TLS context per process, as httpx would build it (SSL_CERT_FILE / SSL_CERT_DIR, else certifi's bundle).

    Building one reads and parses the whole CA bundle (~30 ms of CPU here, more on a Pi); the SDK's default client
    builds a new one per client, on the event loop, even for a plain-http local server."""
    import httpx

    return httpx.create_ssl_context()


def _import_sdk() -> None:
    import httpx  # noqa: F401
    import openai  # noqa: F401


def _rejected_field(exc: Any, request: dict[str, Any]) -> str | None:
    """The optional request field a 400 error names (its `param`, or its message), if the request carried it."""
    said = f"{getattr(exc, 'param', None) or ''} {getattr(exc, 'message', '') or ''} {exc.body!r}".lower()
    for field in OPTIONAL_FIELDS:
        if field in request and field in said:
            return field
    return None


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
