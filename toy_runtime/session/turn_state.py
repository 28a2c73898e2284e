"""One turn in progress, as the runner (`turn.py`) and the offline gate (`gate.py`) hand it to each other.

Who the turn is (`turn_id`), what the child said (`context`: the words, the time, the locale), the kernel batch its
events run in (`run`), how to say a sentence (`say`) and what was said so far (`spoken`); and, as the turn goes on,
who answered it (`path`) and the fault that ended the model's call (`fault`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Callable

from ..events import BatchRun, ResolveContext
from .items import Speech, SpeechKind

__all__ = ["Turn", "TurnPath"]


class TurnPath(StrEnum):
    """Who answered the turn (`turn.completed` path)."""

    LLM = "llm"  # the model (also when it faulted after speaking)
    GATE = "gate"  # the offline gate: no model, a fault it covered, or a step-in
    CONFIRMATION = "confirmation"  # a yes or no to the previous turn's question


@dataclass
class Turn:
    """One turn in progress (see the module docstring); `say` appends to `spoken` what it emits."""

    turn_id: str
    context: ResolveContext
    run: BatchRun
    say: Callable[[Speech], None]
    spoken: list[Speech] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)  # perf_counter seconds
    path: TurnPath = TurnPath.LLM
    fault: str | None = None

    @property
    def text(self) -> str:
        """What the child said."""
        return self.context.utterance

    @property
    def locale(self) -> str:
        return self.context.locale

    @property
    def replied(self) -> bool:
        """Something other than a holding cue was said."""
        return any(s.kind != SpeechKind.HOLDING for s in self.spoken)
