"""Is the speech that just started during an answer the child, or the toy's own voice leaking past the canceller?

The echo canceller re-learns the echo whenever the path jumps (a device underrun, a dropped capture block, a busy
machine): for a second or so its output then carries the toy's voice loudly enough for the VAD, and a speech start
would interrupt the answer with the toy's own words. `echo_likeness(window_s)` (audio/echo_stage.py) says how much
the last `window_s` of what the listener heard looks like what the toy played: ~0 for the child, high for a leak.

One short window decides badly: at a speech start only ~60 ms of the 160 ms are speech. Replayed on a busy echo-rig
capture (docs/benchmarks.md, "Ears"), the child speaking over the toy scored up to 0.77 over 160 ms but at most 0.27
over 320 ms, and linear leaks of the render scored ≥ 0.45 (p10) at either length. So the check has two steps:
a start that clearly is not the toy (below `clear_below` over 160 ms: most children) interrupts at once; any other
waits `confirm_after_s` and is judged over `confirm_window_s` against `own_above`. The wait only delays the
ambiguous starts (the barge-in stop target is 300 ms from the child's first word; detection takes ~140 ms). With
the line at 0.15 most children waited (stop p50 280 ms on the rig); leaks seen live scored 0.21–0.74 over 160 ms,
so 0.2. Leaks cluster right after a jump in the render's timeline (a speaker underrun): for `disturbed_s` after
one (audio/echo_stage.py) every start is confirmed, against a lower line — on the busy 100-answer rig run the
three leaks that got through scored 0.17–0.31 over 320 ms, both within a second of the run's two underruns, while
children over the toy scored at most 0.23 at any time.

Before the canceller has learnt the echo path at all (`learning`: the first 2.5 s the toy ever says) no score tells
a leak from a child: a leak in `run`'s first answer scored 0.11. Then nothing interrupts: a child who speaks over
the first seconds of the toy's first answer after start-up is heard after it, not over it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Callable

__all__ = ["OwnVoiceCheck", "OwnVoiceVerdict"]


@dataclass(frozen=True)
class OwnVoiceVerdict:
    """The check's answer: the toy's own voice or not, the score it was decided on, over what window, and
    whether the canceller was thought to be leaking then (`wary`: the stricter line)."""

    own_voice: bool
    score: float
    window_s: float
    wary: bool = False
    learning: bool = False  # the canceller had not learnt the echo path yet: nothing interrupts


@dataclass(frozen=True)
class OwnVoiceCheck:
    """Two-step own-voice check over `likeness(window_s) -> 0..1`."""

    likeness: Callable[[float], float]
    disturbed: Callable[[], bool] = lambda: False
    learning: Callable[[], bool] = lambda: False
    first_window_s: float = 0.16
    clear_below: float = 0.2
    confirm_after_s: float = 0.16
    confirm_window_s: float = 0.32
    own_above: float = 0.35
    own_above_disturbed: float = 0.15

    def first(self) -> OwnVoiceVerdict | None:
        """The immediate verdict: not the toy when the first window clearly says so, else None (confirm). Right
        after a jump in the render's timeline (`disturbed()`) there is none: every start is confirmed."""
        if self.disturbed():
            return None
        score = self.likeness(self.first_window_s)
        return OwnVoiceVerdict(False, score, self.first_window_s) if score < self.clear_below else None

    def confirmed(self) -> OwnVoiceVerdict:
        """The verdict over the longer window (call `confirm_after_s` after the start). Right after a jump the
        canceller is known to leak, and the line is lower: a child who speaks then may have to say it again,
        which beats the toy interrupting itself."""
        score = self.likeness(self.confirm_window_s)
        wary = self.disturbed()
        line = self.own_above_disturbed if wary else self.own_above
        return OwnVoiceVerdict(score > line, score, self.confirm_window_s, wary)

    async def judge(self) -> OwnVoiceVerdict:
        """The verdict for a speech start that happened just now (the listener keeps hearing while it waits).
        While the canceller is still `learning()` the echo path, the toy's own voice, whatever it scores."""
        if self.learning():
            return OwnVoiceVerdict(own_voice=True, score=self.likeness(self.confirm_window_s),
                                   window_s=self.confirm_window_s, wary=True, learning=True)
        verdict = self.first()
        if verdict is not None:
            return verdict
        await asyncio.sleep(self.confirm_after_s)
        return self.confirmed()
