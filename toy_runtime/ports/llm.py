"""The LLM port: one streaming chat completion, as the agent needs it, and the values that flow out of it.

What the core asks of a language model is a stream of typed items (visible text, raw tool-call deltas) with its
cost and timing in a `CallStats`, and one `LLMFault` with a stable code for anything that goes wrong, whatever
the provider. `agent/llm.py:ChatClient` implements it over any OpenAI-compatible endpoint; its `transport=` seam
(an httpx transport) lets the tests run it in-process (`testing/scripted_transport.py`) as well as on the wire.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Literal, Protocol, runtime_checkable

from ..errors import ToyError

__all__ = ["CallStats", "ChatStream", "Collected", "ContentDelta", "LLMFault", "StreamItem", "ToolCallDeltas"]


class LLMFault(ToyError):
    """A provider failure with a stable code: connect | first_token_timeout | timeout | disconnect | http_<status> |
    empty_stream | truncated | protocol."""

    code = "llm_fault"

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


@dataclass(frozen=True)
class Collected:
    """A streamed answer put back together: its visible text and each tool call as (name, arguments text)."""

    content: str
    tool_calls: tuple[tuple[str, str], ...]


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
    prefetched_ms: float | None = None  # the request went out this long before the call (speculation adopted)

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
            "prefetched_ms": r(self.prefetched_ms),
        }


@runtime_checkable
class ChatStream(Protocol):
    """A streaming chat-completion endpoint: what ChatAgent, EventAgent and the turn ask of the model.

    Every call fills the `CallStats` it is given (first chunk, first content, tokens, finish reason, fault) and
    raises `LLMFault` on any provider fault; a stream that ends without a finish reason is a fault too."""

    base_url: str  # named in log lines only
    include_usage: bool  # the provider is asked for its token usage (else the counts are estimates)

    def stream(self, stats: CallStats, *, model: str, messages: list[dict[str, Any]],
               tools: list[dict[str, Any]] | None = None, tool_choice: Any = None,
               sampling: dict[str, Any] | None = None) -> AsyncIterator[StreamItem]:
        """Yield content and tool-call deltas of one streamed request as they arrive."""
        ...

    async def collect(self, stats: CallStats, *, model: str, messages: list[dict[str, Any]],
                      tools: list[dict[str, Any]] | None = None, tool_choice: Any = None,
                      **sampling: Any) -> Collected:
        """One streamed request put back together (text and whole tool calls)."""
        ...

    async def prefetch(self, *, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                       tool_choice: Any = None, sampling: dict[str, Any] | None = None,
                       on_cancel: Callable[[str], None] | None = None) -> bool:
        """Send a request ahead of its turn; a later `stream()` of the very same request reads it. False when it
        could not be sent (nothing to adopt then)."""
        ...

    async def cancel_prefetch(self, reason: str) -> bool:
        """Cancel the request sent ahead, unread (True if there was one)."""
        ...
