"""Never silent: a short holding cue while the first answer is late, and a hard deadline for it.

The watch takes durations and a monotonic clock, so a test injects a short cue delay and asserts the order of
items, never a duration.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, Awaitable, Callable, Mapping, Sequence

from ..errors import ToyError


class TurnDeadline(ToyError):
    """The first answer was not complete by the turn deadline; it was abandoned."""

    code = "turn_deadline"


class HoldingCues:
    """Picks a holding cue for a locale at random, never the same one twice in a row."""

    def __init__(self, cues: Mapping[str, Sequence[str]], rng: random.Random | None = None) -> None:
        self.cues = {locale: tuple(lines) for locale, lines in cues.items() if lines}
        if "en" not in self.cues:
            raise ValueError("holding cues need at least one English line")
        self.rng = rng or random.Random()
        self._last: str | None = None

    def pick(self, locale: str) -> str:
        """A cue in the child's language (English when there is none for it)."""
        lines = self.cues.get(locale) or self.cues["en"]
        choices = [line for line in lines if line != self._last] or list(lines)
        self._last = self.rng.choice(choices)
        return self._last


async def answer_in_time(work: Awaitable[Any], *, cue_after_s: float, deadline_s: float,
                         on_cue: Callable[[], None], monotonic: Callable[[], float], name: str) -> Any:
    """Run `work` as its own task; call `on_cue` once if it is still running `cue_after_s` from now, and cancel it
    and raise TurnDeadline if it is still running `deadline_s` from now. Both may already be due (≤ 0)."""
    task = asyncio.ensure_future(work)
    task.set_name(name)
    started = monotonic()
    marks = sorted([(cue_after_s, "cue"), (deadline_s, "deadline")])
    try:
        for at, mark in marks:
            if mark == "cue" and at >= deadline_s:
                continue  # the deadline comes first: no cue right before the fault line
            left = at - (monotonic() - started)
            done, _ = await asyncio.wait({task}, timeout=max(left, 0.0))
            if done:
                return task.result()
            if mark == "cue":
                on_cue()
                continue
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise TurnDeadline(f"no complete answer within {deadline_s:g} s")
        return await task  # unreachable: the deadline mark always ends the loop
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
