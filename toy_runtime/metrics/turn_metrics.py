"""What one text turn cost and how fast it was: the `turn.completed` audit record and `TurnEnd.metrics`.

`TurnMetrics.measure()` reads the finished turn (its chat calls, the EventAgent calls it paid for, the kernel's
outcome and when its first, holding and second speech started) and `as_dict()` writes the record's fields, whose
names and values `toy-runtime report` (`metrics/turns.py`), the benches and the tests read. Pure data: the clock
readings are passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..events import BatchOutcome, ResolutionPath
from ..ports.llm import CallStats

__all__ = ["EventMetrics", "TurnMetrics"]


@dataclass(frozen=True)
class EventMetrics:
    """One event of the turn: how it ended, how it was resolved, and its delays (ms)."""

    name: str
    status: str
    resolution: str | None
    fallback_used: bool
    dispatch_delay_ms: float
    latency_ms: float

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "resolution": self.resolution,
                "fallback_used": self.fallback_used, "dispatch_delay_ms": self.dispatch_delay_ms,
                "latency_ms": self.latency_ms}


@dataclass(frozen=True)
class TurnMetrics:
    """One turn's cost and latency; times in ms after the turn started, None when it never happened."""

    mode: str  # the invocation mode, or "offline"
    path: str  # llm | gate | confirmation: who answered
    fault: str | None  # the ChatAgent fault's code, if any
    llm_calls: int  # chat calls that reached the provider + the EventAgent calls of this turn
    chat_calls: int
    first_answer: CallStats | None
    second_answer: CallStats | None
    first_speech_ms: float | None
    holding_cue_ms: float | None
    second_speech_ms: float | None
    prompt_tokens: int  # of the chat calls
    completion_tokens: int
    event_agent_calls: int
    event_agent_tokens: int
    events: tuple[EventMetrics, ...] = field(default=())
    dropped_events: tuple[str, ...] = ()
    deterministic_hits: int = 0  # events resolved without the EventAgent
    deterministic_hit_rate: float | None = None  # of the resolved events
    dispatch_delay_ms_max: float | None = None
    total_ms: float = 0.0

    @classmethod
    def measure(cls, *, mode: str, path: str, fault: str | None, started: float, now: float,
                first: CallStats | None, second: CallStats | None, agent_calls: Sequence[CallStats],
                outcome: BatchOutcome, first_speech_at: float | None, holding_at: float | None,
                second_speech_at: float | None) -> "TurnMetrics":
        """The metrics of a finished turn (perf_counter seconds in; ms out)."""
        ms = lambda at: None if at is None else round((at - started) * 1000, 3)  # noqa: E731
        # a call that never reached the provider (connection refused) is not an LLM call
        chat_calls = [c for c in (first, second) if c is not None and c.fault != "connect"]
        results = list(outcome.results)
        events = tuple(EventMetrics(
            name=result.name,
            status=result.status.value,
            resolution=result.resolution.value if result.resolution else None,
            fallback_used=result.fallback_used,
            dispatch_delay_ms=delay,
            latency_ms=round(result.timings.total_ms, 3),
        ) for result, delay in zip(results, outcome.dispatch_delays_ms))
        resolved = [r for r in results if r.resolution is not None]
        deterministic = [r for r in resolved if r.resolution is not ResolutionPath.LLM_FALLBACK and not r.fallback_used]
        return cls(
            mode=mode, path=path, fault=fault,
            llm_calls=len(chat_calls) + len(agent_calls),
            chat_calls=len(chat_calls),
            first_answer=first, second_answer=second,
            first_speech_ms=ms(first_speech_at), holding_cue_ms=ms(holding_at), second_speech_ms=ms(second_speech_at),
            prompt_tokens=sum(c.prompt_tokens for c in chat_calls),
            completion_tokens=sum(c.completion_tokens for c in chat_calls),
            event_agent_calls=len(agent_calls),
            event_agent_tokens=sum(c.prompt_tokens + c.completion_tokens for c in agent_calls),
            events=events,
            dropped_events=tuple(outcome.dropped),
            deterministic_hits=len(deterministic),
            deterministic_hit_rate=round(len(deterministic) / len(resolved), 3) if resolved else None,
            dispatch_delay_ms_max=max(outcome.dispatch_delays_ms, default=None),
            total_ms=round((now - started) * 1000, 3),
        )

    def as_dict(self) -> dict[str, Any]:
        """The `turn.completed` fields, in their order (plain JSON values)."""
        return {
            "mode": str(self.mode),
            "path": str(self.path),
            "fault": self.fault,
            "llm_calls": self.llm_calls,
            "chat_calls": self.chat_calls,
            "first_answer": self.first_answer.as_dict() if self.first_answer else None,
            "second_answer": self.second_answer.as_dict() if self.second_answer else None,
            "first_speech_ms": self.first_speech_ms,
            "holding_cue_ms": self.holding_cue_ms,
            "second_speech_ms": self.second_speech_ms,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "event_agent": {"calls": self.event_agent_calls, "tokens": self.event_agent_tokens},
            "events": [event.as_dict() for event in self.events],
            "dropped_events": list(self.dropped_events),
            "deterministic_hits": self.deterministic_hits,
            "deterministic_hit_rate": self.deterministic_hit_rate,
            "dispatch_delay_ms_max": self.dispatch_delay_ms_max,
            "total_ms": self.total_ms,
        }
