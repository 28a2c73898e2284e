"""In-memory echo cancellers: the pass-through (front end off) and a subtracting fake for unit tests."""

from __future__ import annotations

import array

__all__ = ["PassThroughCanceller", "SubtractingCanceller"]


class PassThroughCanceller:
    """The front end switched off: the capture frame comes out unchanged, the render frame is ignored."""

    cancels_echo = False
    suppresses_noise = False
    delay_samples = 0

    def __init__(self, sample_rate_hz: int = 16000) -> None:
        self.sample_rate_hz = sample_rate_hz
        self.frames = 0

    def process(self, capture: bytes, render: bytes) -> bytes:
        """Returns `capture` as it is."""
        self.frames += 1
        return capture

    def describe(self) -> str:
        """"echo cancellation: off"."""
        return "echo cancellation: off"


class SubtractingCanceller:
    """A perfect canceller for an echo path that is exactly `gain` × the render frame (unit tests of the wiring).

    It records every render frame it was given, so a test can see that the reference arrived and was aligned.
    `delay_samples`: its output comes that much later than its input (silence first), as a real canceller's does.
    """

    cancels_echo = True
    suppresses_noise = False

    def __init__(self, sample_rate_hz: int = 16000, *, gain: float = 1.0, delay_samples: int = 0) -> None:
        self.sample_rate_hz = sample_rate_hz
        self.gain = gain
        self.delay_samples = delay_samples
        self.renders: list[bytes] = []
        self._held = array.array("h", bytes(2 * delay_samples))

    def process(self, capture: bytes, render: bytes) -> bytes:
        """capture − gain × render, clipped to int16 (`delay_samples` late)."""
        self.renders.append(render)
        mic, ref = array.array("h", capture), array.array("h", render)
        out = array.array("h", (max(-32768, min(32767, round(m - self.gain * r))) for m, r in zip(mic, ref)))
        if not self.delay_samples:
            return out.tobytes()
        self._held.extend(out)
        ready, self._held = self._held[: len(out)], self._held[len(out):]
        return ready.tobytes()

    def describe(self) -> str:
        """"echo cancellation: subtracting fake"."""
        return "echo cancellation: subtracting fake"
