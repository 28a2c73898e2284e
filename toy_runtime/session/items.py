"""What a turn emits, in order of occurrence: speech, event outcomes, and the turn's end with its metrics; and the
small vocabularies they are told in (answer slot, speech kind, why a session ended)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any

from ..events import EventResult


class Answer(IntEnum):
    """Which answer of the turn a sentence belongs to (an int on the wire: 0, 1, 2)."""

    HOLDING = 0  # a holding cue, said while the first reply is late
    FIRST = 1  # the first reply (the model's, the gate's, a confirmation's)
    SECOND = 2  # anything after events ran: continuation lines, corrections, the follow-up


class SpeechKind(StrEnum):
    """Where a sentence comes from (its value is what the audit, the console and the transcript show)."""

    REPLY = "reply"  # the model's first answer
    HOLDING = "holding"  # a holding cue
    GATE = "gate"  # the offline gate's templated line for a clear request
    CONTINUATION = "continuation"  # the kernel's deterministic lines after events ran
    CORRECTION = "correction"  # an action the words promised that did not happen
    FOLLOW_UP = "follow_up"  # the one aggregated follow-up answer
    FAULT = "fault"  # the fault line
    OFFLINE = "offline"  # no model to ask
    CONFIRMATION = "confirmation"  # a held event's yes/no settled, or done
    REMINDER = "reminder"  # a reminder's line (chat)
    ANNOUNCEMENT = "announcement"  # spoken as a session opens (a reminder, by voice)


class SessionEnd(StrEnum):
    """Why a voice session closed (`voice.session_closed` reason)."""

    TERMINATED = "terminated"  # an event ended it (the child said goodbye)
    IDLE = "idle"  # nobody spoke for the idle timeout
    CLOSED = "closed"  # a control message (button, remote command) or an error
    STOP = "stop"  # the loop is shutting down
    SOURCE_ENDED = "source_ended"  # the audio source ended


@dataclass(frozen=True)
class Speech:
    """A sentence (or early clause) to say, in answer slot `answer` (an int is taken as its `Answer`), of kind
    `kind` (a string is taken as its `SpeechKind`)."""

    answer: Answer
    text: str
    sources: tuple[dict[str, str], ...] = ()
    kind: SpeechKind = SpeechKind.REPLY
    at: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        # callers may still write `Speech(1, ..., kind="gate")`: the values are the enums' (an unknown one raises)
        object.__setattr__(self, "answer", Answer(self.answer))
        object.__setattr__(self, "kind", SpeechKind(self.kind))

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "speech", "answer": int(self.answer), "text": self.text,
                               "kind": self.kind.value}
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
