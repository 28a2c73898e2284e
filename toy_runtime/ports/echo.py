"""The capture front end's port: echo cancellation (and noise suppression) on 10 ms frames.

The toy's speaker sits a few centimetres from its one microphone. The runtime knows every sample it plays, so the
canceller gets a perfect far-end reference: `process(capture, render)` takes one 10 ms frame of what the mic heard
and the 10 ms of speaker output that belongs to the same moment (`audio/echo_reference.py` aligns them) and
returns the mic frame with the toy's own voice removed.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["FRAME_MS", "EchoCanceller", "LinearEchoCanceller"]

FRAME_MS = 10  # every frame on this port is exactly 10 ms (WebRTC's processing unit)


@runtime_checkable
class EchoCanceller(Protocol):
    """Removes the speaker's echo (and, when it says so, steady noise) from captured audio, 10 ms at a time.

    All PCM is signed 16-bit little-endian mono at `sample_rate_hz`. Frames must be fed in capture order, each
    with its render frame (silence when nothing played): the filter stays converged across answers only when it
    sees every frame.
    """

    sample_rate_hz: int
    cancels_echo: bool  # False: a pass-through (what `describe()` reports as "off")
    suppresses_noise: bool
    # How many samples later a sound comes out of process() than it went in: the algorithm's own latency (WebRTC's
    # AEC3 works in 4 ms blocks, its noise suppressor overlaps its windows). The capture stage dates its frames by
    # it, so the end of speech and the logged latency are where the child was heard (audio/echo_stage.py).
    delay_samples: int

    def process(self, capture: bytes, render: bytes) -> bytes:
        """One 10 ms capture frame and its 10 ms render frame in, the cleaned capture frame out (same length)."""
        ...

    def describe(self) -> str:
        """One line for the console and `doctor`, e.g. "echo cancellation: WebRTC AEC3, noise suppression: on"."""
        ...


@runtime_checkable
class LinearEchoCanceller(EchoCanceller, Protocol):
    """A canceller with no delay estimate of its own (a plain adaptive filter, e.g. speexdsp's MDF): its filter
    covers a fixed span after the render, so it is told how late the echo comes (the capture stage measures it)."""

    def set_render_lead(self, samples: int) -> None:
        """Delay the render by `samples` before the filter: the echo comes at least that late after it."""
        ...
