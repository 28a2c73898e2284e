"""The wake word heard at the child's pitch and at a lower one: one phrase, two detectors on two views of the audio.

The builtin model misses high voices: on the wake-word bench (scripts/bench_wake_word.py, 441 phrases in 7 voices
with noise) 37 of its 63 misses were espeak's high en-us+f2. Played slower and lower — the audio resampled by
1.15 and taken as 16 kHz again, so pitch and tempo fall by 1/1.15 — the same model hears most of them. A second
detector listens to that view at a stricter cutoff of its own (0.8: at 0.7 it woke once in 30 minutes of speech,
at the primary's 0.5 twice), and either one wakes the toy: misses 63 → 35 of 441, the high voice's 37 → 11, with
still no false wake in the 30 minutes (docs/benchmarks.md, "Wake word"). It costs one more small model run and a
resampler: 0.26 → 0.89 % of a core.

A view runs on the audio as it comes, so it adds no delay: the slowed phrase ends, in the view, when the real one
does (its resampler's look-ahead, ~1 ms, aside).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from .resample import Resampler

if TYPE_CHECKING:
    from ..ports.wake import WakeWordDetector

__all__ = ["PitchViews"]

_RATE = 16000


class PitchViews:
    """A WakeWordDetector: `primary` on the audio as it is, and each of `views` — (factor, detector) — on the audio
    resampled by `factor` (> 1: lower and slower). Fires when any of them does, once per utterance: after a
    detection the others are ignored for `refractory_s` of audio (they would hear the same phrase)."""

    def __init__(self, primary: WakeWordDetector, views: Sequence[tuple[float, WakeWordDetector]], *,
                 refractory_s: float = 1.0) -> None:
        for factor, _ in views:
            if not 0.5 <= factor <= 2.0:
                raise ValueError(f"a wake-word view's factor {factor} is not between 0.5 and 2")
        self.primary = primary
        self.name: str = primary.name
        self._views = [(Resampler(_RATE, round(_RATE * factor)), detector) for factor, detector in views]
        self.factors = tuple(float(factor) for factor, _ in views)
        self._refractory = int(refractory_s * _RATE)
        self._deaf = 0  # samples of the refractory period still to go
        self.fired_by: list[int] = [0] * (1 + len(views))  # detections each detector made (0: the primary)

    @property
    def probability_cutoff(self) -> float:
        """The primary detector's cutoff (the benches and the console show it)."""
        return float(getattr(self.primary, "probability_cutoff", float("nan")))

    def process(self, pcm: bytes) -> bool:
        """Feed 16 kHz int16 mono audio of any length to every detector; True when one heard the phrase end."""
        fired = [self.primary.process(pcm)]
        for resampler, detector in self._views:  # every view is fed, deaf or not: each keeps up with the audio
            view = resampler.process(pcm)
            fired.append(bool(view) and detector.process(view))
        if self._deaf > 0:
            self._deaf = max(0, self._deaf - len(pcm) // 2)
            return False
        if not any(fired):
            return False
        self.fired_by[fired.index(True)] += 1
        self._deaf = self._refractory
        return True

    def reset(self) -> None:
        """Forget everything heard, in every view: each detector as new, the resamplers' history cleared."""
        self.primary.reset()
        for resampler, detector in self._views:
            resampler.reset()
            detector.reset()
        self._deaf = 0

    def close(self) -> None:
        """Release every detector's model now."""
        for detector in (self.primary, *(d for _, d in self._views)):
            close = getattr(detector, "close", None)
            if close is not None:
                close()
