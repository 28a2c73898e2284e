"""The wake-word port: a detector fed the cleaned capture audio while no session is open."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["WakeWordDetector"]


@runtime_checkable
class WakeWordDetector(Protocol):
    """Listens for one phrase in 16 kHz int16 mono audio, fed in pieces of any length in capture order."""

    name: str  # the phrase, as a person would say it ("Okay Nabu")

    def process(self, pcm: bytes) -> bool:
        """Feed audio; True when the phrase ended inside it (once per utterance of it)."""
        ...

    def reset(self) -> None:
        """Forget everything heard so far (after a detection, and when listening for it starts again)."""
        ...
