"""What the demo's child says, and what the toy must do for each line to count as understood.

Hearing words is not understanding them: a volume request counts only if the volume really changed as asked,
a goodbye only if the session ended, a question only if the model answered it (not the offline or fault line).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from ..ports.device import MixerState

__all__ = ["Line", "Verdict", "Answered", "VolumeSet", "VolumeUp", "SessionEnds", "ReminderSet", "Handled",
           "DEFAULT_SCRIPT", "CHINESE_SCRIPT", "SCRIPTS", "as_lines", "judge"]


@dataclass(frozen=True)
class TurnView:
    """What the demo saw of one turn: the voice loop's record and the mixer before and after it."""

    record: Any  # metrics.voice_turn.VoiceTurnRecord
    before: MixerState
    after: MixerState

    @property
    def path(self) -> str | None:
        return self.record.turn_metrics.get("path")

    @property
    def fault(self) -> str | None:
        return self.record.turn_metrics.get("fault")

    def events(self, status: str | None = None) -> list[str]:
        return [e["name"] for e in self.record.events if status is None or e["status"] == status]


class Expectation(Protocol):
    """A check of one turn; `check` returns None when it was met, else why not (one short clause)."""

    @property
    def description(self) -> str: ...

    def check(self, turn: TurnView) -> str | None: ...


def _model_answered(turn: TurnView) -> str | None:
    if turn.fault is not None:
        return f"the model call failed ({turn.fault})"
    if turn.path != "llm":
        return "no model answered (the offline line was spoken)"
    if not turn.record.spoken:
        return "nothing was said"
    return None


@dataclass(frozen=True)
class Answered:
    """The model answered (a question or a story; anything the toy only has to talk about)."""

    description: str = "an answer from the model"

    def check(self, turn: TurnView) -> str | None:
        return _model_answered(turn)


@dataclass(frozen=True)
class VolumeSet:
    """The volume is now `level` percent (and not muted)."""

    level: int

    @property
    def description(self) -> str:
        return f"volume set to {self.level}"

    def check(self, turn: TurnView) -> str | None:
        if turn.after.level == self.level and not turn.after.muted:
            return None
        return f"the volume is {turn.after.level}{' (muted)' if turn.after.muted else ''}"


@dataclass(frozen=True)
class VolumeUp:
    """The volume went up."""

    description: str = "volume up"

    def check(self, turn: TurnView) -> str | None:
        if turn.after.level > turn.before.level and not turn.after.muted:
            return None
        return f"the volume stayed at {turn.before.level}" if turn.after.level == turn.before.level else (
            f"the volume went from {turn.before.level} to {turn.after.level}")


@dataclass(frozen=True)
class SessionEnds:
    """The session ended (a goodbye)."""

    description: str = "the session ends"

    def check(self, turn: TurnView) -> str | None:
        return None if turn.record.terminated else "the session went on"


@dataclass(frozen=True)
class ReminderSet:
    """A reminder was written to the calendar (the schedule event succeeded)."""

    description: str = "a reminder set"

    def check(self, turn: TurnView) -> str | None:
        if "calendar.schedule.create" in turn.events("succeeded"):
            return None
        return "no reminder was set" if "calendar.schedule.create" not in turn.events() else "the reminder failed"


@dataclass(frozen=True)
class Handled:
    """For lines without a known expectation (`demo --say`): an event succeeded, the session ended, or the model
    answered. Only the offline or fault line, or a failed event, is not handled."""

    description: str = "something done or answered"

    def check(self, turn: TurnView) -> str | None:
        if turn.events("succeeded") or turn.record.terminated:
            return None
        failed = [name for name in turn.events() if name not in turn.events("succeeded")]
        if failed:
            return f"{', '.join(failed)} did not succeed"
        return _model_answered(turn)


@dataclass(frozen=True)
class Line:
    """One child utterance and what it asks for."""

    text: str
    expect: Expectation = Handled()


DEFAULT_SCRIPT: tuple[Line, ...] = (
    Line("Can you tell me a story about a dragon?", Answered()),
    Line("Set the volume to thirty.", VolumeSet(30)),
    Line("A bit louder please.", VolumeUp()),
    Line("See you later.", SessionEnds()),
)


CHINESE_SCRIPT: tuple[Line, ...] = (
    Line("给我讲一个小龙的故事好吗？", Answered()),
    Line("把音量调到三十。", VolumeSet(30)),
    Line("明天早上八点提醒我刷牙。", ReminderSet()),
    Line("再见。", SessionEnds()),
)

SCRIPTS = {"en": DEFAULT_SCRIPT, "zh": CHINESE_SCRIPT}
"""The demo's stories by language (`demo --story`)."""


def as_lines(script: Sequence[Line | str]) -> tuple[Line, ...]:
    """Plain strings become lines that only need to be handled somehow."""
    return tuple(item if isinstance(item, Line) else Line(item) for item in script)


@dataclass(frozen=True)
class Verdict:
    """Whether one line was understood, and why not."""

    line: Line
    heard: str | None  # None: no turn came of it
    problem: str | None

    @property
    def understood(self) -> bool:
        return self.heard is not None and self.problem is None

    def as_dict(self) -> dict[str, Any]:
        return {"said": self.line.text, "expected": self.line.expect.description, "heard": self.heard,
                "understood": self.understood, "problem": self.problem}


def judge(line: Line, record: Any, before: MixerState, after: MixerState) -> Verdict:
    """The verdict for one turn (`before`/`after`: the mixer around it)."""
    if not record.text:
        return Verdict(line, record.text, "nothing was heard")
    return Verdict(line, record.text, line.expect.check(TurnView(record, before, after)))
