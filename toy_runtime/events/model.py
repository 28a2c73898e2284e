"""Typed values that flow through the event kernel: requests, batches, results, timings.

Nothing here knows a concrete event; names are opaque strings owned by plugins.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping


class SourceProtocol(enum.StrEnum):
    """How an event request entered the kernel."""

    TEXT_EVENTS = "text_events"  # hidden <agent_events> block (dual_agent mode)
    TOOL_CALLS = "tool_calls"  # native provider tool calls (chat_agent_tools mode)
    OFFLINE_GATE = "offline_gate"  # deterministic gate without an LLM
    HOST = "host"  # a host event (remote command, button, scheduler)


class EventStatus(enum.StrEnum):
    """Final status of one event in a batch."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REJECTED = "rejected"
    NEEDS_CLARIFICATION = "needs_clarification"
    NEEDS_CONFIRMATION = "needs_confirmation"
    TIMED_OUT = "timed_out"
    SKIPPED_DUPLICATE = "skipped_duplicate"


class ResolutionPath(enum.StrEnum):
    """Where the final arguments came from."""

    DETERMINISTIC = "deterministic"
    PROVIDER = "provider"
    LLM_FALLBACK = "llm_fallback"


class ResultPolicy(enum.StrEnum):
    """What the runtime does with an event's result after execution."""

    TERMINATE = "terminate"
    SILENT_SUCCESS = "silent_success"
    TEMPLATE_FOLLOW_UP = "template_follow_up"
    LLM_FOLLOW_UP = "llm_follow_up"


class Risk(enum.StrEnum):
    """How much harm a wrong execution can do; used for confirmation and audit."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


def new_event_id() -> str:
    """A fresh, globally unique event id."""
    return "ev_" + uuid.uuid4().hex[:16]


@dataclass(frozen=True)
class EventRequest:
    """One event a model (or host) asked for, before resolution.

    `arguments` is what the provider proposed (None when nothing was proposed);
    `arguments_error` explains why proposed arguments were discarded (e.g. malformed JSON).
    """

    name: str
    turn_id: str
    source: SourceProtocol
    arguments: Mapping[str, Any] | None = None
    event_id: str = field(default_factory=new_event_id)
    arguments_error: str | None = None


@dataclass(frozen=True)
class EventBatch:
    """An ordered, flat list of event requests from one model response."""

    session_id: str
    turn_id: str
    requests: tuple[EventRequest, ...]

    def __len__(self) -> int:
        return len(self.requests)


@dataclass
class EventTimings:
    """Monotonic milliseconds spent in each stage of one event (relative to batch start)."""

    resolve_ms: float = 0.0
    fallback_ms: float = 0.0
    queued_ms: float = 0.0
    execute_ms: float = 0.0
    total_ms: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 3) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class EventResult:
    """The normalized outcome of one event request."""

    event_id: str
    name: str
    status: EventStatus
    policy: ResultPolicy
    arguments: Mapping[str, Any]
    resolution: ResolutionPath | None
    result: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    error_code: str | None = None
    question: str | None = None  # clarification / confirmation question to ask the user
    missing: tuple[str, ...] = ()
    idempotency_key: str | None = None
    replayed: bool = False  # True when the idempotency store returned an earlier result
    fallback_used: bool = False
    fallback_tokens: int = 0
    timings: EventTimings = field(default_factory=EventTimings)

    @property
    def ok(self) -> bool:
        return self.status is EventStatus.SUCCEEDED

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly view (for audit lines and `chat --json`)."""
        return {
            "event_id": self.event_id,
            "name": self.name,
            "status": self.status.value,
            "policy": self.policy.value,
            "arguments": dict(self.arguments),
            "resolution": self.resolution.value if self.resolution else None,
            "result": dict(self.result),
            "error": self.error,
            "error_code": self.error_code,
            "question": self.question,
            "missing": list(self.missing),
            "replayed": self.replayed,
            "fallback_used": self.fallback_used,
            "fallback_tokens": self.fallback_tokens,
            "timings": self.timings.as_dict(),
        }
