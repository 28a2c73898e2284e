"""In-memory wake-word detectors for unit tests: one that fires after given amounts of audio, one that never does."""

from __future__ import annotations

from typing import Iterable

__all__ = ["NeverWakes", "ScriptedWakeWord"]


class ScriptedWakeWord:
    """Fires when the audio fed since the last reset passes each of `after_samples` in turn."""

    def __init__(self, after_samples: Iterable[int] = (), *, name: str = "okay toy") -> None:
        self.name = name
        self._due = sorted(after_samples)
        self._fed = 0
        self.resets = 0

    def process(self, pcm: bytes) -> bool:
        """Count the samples; True when one of the scripted points was passed."""
        self._fed += len(pcm) // 2
        if self._due and self._fed >= self._due[0]:
            self._due.pop(0)
            return True
        return False

    def reset(self) -> None:
        """Start counting again."""
        self._fed = 0
        self.resets += 1


class NeverWakes:
    """A detector that hears nothing (a trigger other than the wake word, in tests)."""

    name = "nothing"

    def process(self, pcm: bytes) -> bool:
        """Always False."""
        return False

    def reset(self) -> None:
        """Nothing to forget."""
