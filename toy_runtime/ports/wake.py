"""The wake-word port: a detector that listens for one phrase ("Okay Nabu") in the capture audio.

The capture path (`audio/wake_stage.py`) feeds it the cleaned microphone audio, frame by frame, while no session is
open, and opens one when it fires. Audio on this port is 16 kHz signed 16-bit little-endian mono, as on the audio
ports. Adapters: `adapters/micro_wakeword.py` (microWakeWord models); fakes: `fakes/wake.py`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["WakeWordDetector"]


@runtime_checkable
class WakeWordDetector(Protocol):
    """Listens for one phrase in 16 kHz int16 mono audio, fed in pieces of any length, in capture order.

    A detector fires once per utterance of its phrase, as the phrase ends (not again on the rest of the same
    utterance), and never on other speech, silence or noise as far as its model allows. `process` is called on the
    event loop for every microphone frame (20 ms): it must be cheap and must not block.
    """

    name: str
    """The phrase as a person says it, for people: "Okay Nabu" (logs, the console, "say 'Okay Nabu' to talk")."""

    def process(self, pcm: bytes) -> bool:
        """Feed any number of samples (16 kHz int16 mono bytes); True when the phrase ended inside this audio.

        Pieces may have any length (an even number of bytes); the result does not depend on how the audio was cut.
        """
        ...

    def reset(self) -> None:
        """Forget everything heard so far, a phrase half-heard included: afterwards the detector behaves as a new one.

        Called after a detection and whenever listening starts again (the session ended), so audio from before the
        pause cannot complete a phrase after it.
        """
        ...
