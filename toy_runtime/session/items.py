"""What a turn emits, in order of occurrence: speech, event outcomes, and the turn's end with its metrics."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..events import EventResult


@dataclass(frozen=True)
class Speech:
    """A sentence (or early clause) to say. answer=1 is the first reply; 2 is anything after events ran;
    0 is a holding cue said while the first reply is late."""

    answer: int
    text: str
    sources: tuple[dict[str, str], ...] = ()
    kind: str = "reply"  # reply | holding | gate | continuation | correction | follow_up | fault | offline
    at: float = field(default_factory=time.perf_counter)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "speech", "answer": self.answer, "text": self.text, "kind": self.kind}
        if self.sources:
            out["sources"] = [dict(s) for s in self.sources]
        return out


@dataclass(frozen=True)
class EventOutcome:
    """An event reached its final result."""

    result: EventResult
    at: float = field(default_factory=time.perf_counter)

    def as_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "type": "event",
            "event_id": r.event_id,
            "name": r.name,
            "status": r.status.value,
            "arguments": dict(r.arguments),
            "resolution": r.resolution.value if r.resolution else None,
            "result": dict(r.result),
            "error": r.error,
            "question": r.question,
        }


@dataclass(frozen=True)
class TurnEnd:
    """The turn is over."""

    turn_id: str
    llm_calls: int
    terminated: bool
    metrics: dict[str, Any]
    at: float = field(default_factory=time.perf_counter)

    def as_json(self) -> dict[str, Any]:
        return {"type": "turn", "turn_id": self.turn_id, "llm_calls": self.llm_calls,
                "terminated": self.terminated, "metrics": self.metrics}


TurnItem = Speech | EventOutcome | TurnEnd
