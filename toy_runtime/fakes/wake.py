"""In-memory wake-word detectors for unit tests: one that fires at scripted points of the audio, one that never does."""

from __future__ import annotations

from typing import Iterable

__all__ = ["NeverWakes", "ScriptedWakeWord"]


class ScriptedWakeWord:
    """Fires when the audio fed reaches each of `fire_after_samples` (counted over all audio fed, resets included).

    The phrase "is said" in the `phrase_samples` before each point: a `reset()` inside that span forgets it, as a
    real detector forgets a phrase half-heard (0, the default: resets forget nothing). `fed` and `resets` are kept
    for assertions.
    """

    def __init__(self, fire_after_samples: Iterable[int] = (), *, name: str = "Okay Nabu",
                 phrase_samples: int = 0) -> None:
        self.name = name
        self.phrase_samples = phrase_samples
        self.fed = 0
        self.resets = 0
        self._due = sorted(fire_after_samples)

    def process(self, pcm: bytes) -> bool:
        """Count the samples; True when one or more scripted points were reached inside this audio."""
        self.fed += len(pcm) // 2
        fired = False
        while self._due and self._due[0] <= self.fed:
            self._due.pop(0)
            fired = True
        return fired

    def reset(self) -> None:
        """Forget the points whose phrase has begun (within `phrase_samples` ahead)."""
        self.resets += 1
        self._due = [at for at in self._due if at - self.phrase_samples >= self.fed]


class NeverWakes:
    """A detector that hears nothing (a session opened some other way, or a word never said)."""

    name = "Okay Nabu"

    def process(self, pcm: bytes) -> bool:
        """Always False."""
        return False

    def reset(self) -> None:
        """Nothing to forget."""
