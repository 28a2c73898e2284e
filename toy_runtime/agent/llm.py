"""A thin streaming client over `openai.AsyncOpenAI` that turns provider behaviour into typed items and faults.

Provider faults (connect/read timeouts, HTTP errors, a stream that ends without a finish reason or without any
chunk) become `LLMFault` with a stable code, so the turn can speak a fallback line and the next turn still works.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Literal, Sequence

TOKEN_ESTIMATOR = "approx: 1 per CJK char + 1 per 4 other chars (+4 per message)"


def estimate_tokens(text: str) -> int:
    """A tokenizer-free token estimate used when the provider sends no usage (named in reports)."""
    cjk = sum(1 for ch in text if "\u3000" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af" or "\uff00" <= ch <= "\uffef")
    return cjk + (len(text) - cjk + 3) // 4


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


class LLMFault(Exception):
    """A provider failure with a stable code: connect | timeout | http_<status> | empty_stream | truncated | protocol."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    @property
    def unreachable(self) -> bool:
        """True when the endpoint could not be reached at all (the offline gate may answer instead)."""
        return self.code == "connect"


@dataclass(frozen=True)
class ContentDelta:
    """Visible-content text from the model."""

    text: str


@dataclass(frozen=True)
class ToolCallDeltas:
    """Raw `delta.tool_calls` entries of one chunk."""

    deltas: tuple[Any, ...]


StreamItem = ContentDelta | ToolCallDeltas


@dataclass
class CallStats:
    """What one ChatAgent/EventAgent call cost and how fast it was (perf_counter seconds)."""

    purpose: str
    started: float = field(default_factory=time.perf_counter)
    first_chunk_at: float | None = None
    first_content_at: float | None = None
    first_tool_call_at: float | None = None
    finished_at: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_source: Literal["provider", "estimate"] = "estimate"
    finish_reason: str | None = None
    fault: str | None = None
    setup_ms: float = 0.0  # importing the SDK before the first request: the runtime's cost, not the provider's

    @property
    def ttft_ms(self) -> float | None:
        return None if self.first_content_at is None else (self.first_content_at - self.started) * 1000

    @property
    def first_chunk_ms(self) -> float | None:
        return None if self.first_chunk_at is None else (self.first_chunk_at - self.started) * 1000

    @property
    def total_ms(self) -> float | None:
        return None if self.finished_at is None else (self.finished_at - self.started) * 1000

    def as_dict(self) -> dict[str, Any]:
        r = lambda v: None if v is None else round(v, 3)  # noqa: E731
        return {
            "purpose": self.purpose,
            "ttft_ms": r(self.ttft_ms),
            "first_chunk_ms": r(self.first_chunk_ms),
            "first_tool_call_ms": r(None if self.first_tool_call_at is None
                                    else (self.first_tool_call_at - self.started) * 1000),
            "total_ms": r(self.total_ms),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "usage_source": self.usage_source,
            "finish_reason": self.finish_reason,
            "fault": self.fault,
            "setup_ms": round(self.setup_ms, 3),
        }


class ChatClient:
    """Streaming Chat Completions against any OpenAI-compatible endpoint (no automatic retries: latency first).

    The openai SDK is imported on first use, or ahead of it by `warm()`: importing it costs ~0.7-1 s of
    interpreter time (it builds thousands of pydantic models), which `toy-runtime run` spends after it is already
    listening instead of before.
    """

    def __init__(self, *, base_url: str, api_key: str | None, connect_timeout_s: float, read_timeout_s: float,
                 include_usage: bool = True) -> None:
        self.base_url = base_url
        self.include_usage = include_usage
        self._api_key = api_key or "not-needed"
        self._connect_timeout_s = connect_timeout_s
        self._read_timeout_s = read_timeout_s
        self._openai: Any = None
        self._client: Any = None
        self._opening: asyncio.Lock | None = None

    @property
    def ready(self) -> bool:
        """True once the SDK is imported and the HTTP client exists."""
        return self._client is not None

    async def warm(self) -> None:
        """Import the SDK in a worker thread and build the client now, so the first turn does not wait for it."""
        await self._connection()

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
                self._client = openai.AsyncOpenAI(
                    base_url=self.base_url,
                    api_key=self._api_key,
                    max_retries=0,
                    timeout=httpx.Timeout(connect=self._connect_timeout_s, read=self._read_timeout_s,
                                          write=self._read_timeout_s, pool=self._connect_timeout_s),
                )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def stream(self, stats: CallStats, *, model: str, messages: list[dict[str, Any]],
                     tools: list[dict[str, Any]] | None = None, tool_choice: Any = None,
                     sampling: dict[str, Any] | None = None) -> AsyncIterator[StreamItem]:
        """Yield content and tool-call deltas; fill `stats`; raise LLMFault on any provider fault."""
        request: dict[str, Any] = {"model": model, "messages": messages, "stream": True, **(sampling or {})}
        if tools:
            request["tools"] = tools
            if tool_choice is not None:
                request["tool_choice"] = tool_choice
        if self.include_usage:
            request["stream_options"] = {"include_usage": True}
        completion_text: list[str] = []
        saw_chunk = False
        client = await self._connection_for(stats)
        try:
            stream = await client.chat.completions.create(**request)
            try:
                async for chunk in stream:
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
                            if stats.first_content_at is None:
                                stats.first_content_at = now
                            completion_text.append(delta.content)
                            yield ContentDelta(delta.content)
                        if delta is not None and delta.tool_calls:
                            if stats.first_tool_call_at is None:
                                stats.first_tool_call_at = now
                            completion_text.append(json.dumps([tc.model_dump() for tc in delta.tool_calls]))
                            yield ToolCallDeltas(tuple(delta.tool_calls))
                        if choice.finish_reason:
                            stats.finish_reason = choice.finish_reason
            finally:
                await stream.close()
        except self._openai.APITimeoutError as exc:
            raise self._fault(stats, "timeout", str(exc) or "the provider stopped answering") from None
        except self._openai.APIConnectionError as exc:
            # refused before anything came back = unreachable (the offline gate may answer); after = a broken stream
            code = "disconnect" if saw_chunk else "connect"
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
        if not saw_chunk:
            raise self._fault(stats, "empty_stream", "the stream ended without any chunk")
        if stats.finish_reason is None:
            raise self._fault(stats, "truncated", "the stream ended without a finish reason ([DONE] missing)")

    async def complete(self, stats: CallStats, **request: Any) -> Any:
        """One non-streaming request (EventAgent); faults become LLMFault."""
        client = await self._connection_for(stats)
        try:
            response = await client.chat.completions.create(stream=False, **request)
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


def _import_sdk() -> None:
    import httpx  # noqa: F401
    import openai  # noqa: F401


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
