"""The wake word on the capture path: frames pass through unchanged; while armed, each is also given to the
detector, and a detection calls `on_wake` once.

It sits after the echo canceller (the toy saying "okay nabu" in a story must not wake it) and before the listener.
Armed only while no session is open: during a conversation nobody needs the wake word, so it costs nothing then.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, AsyncIterator, Callable

from ..ports.audio import AudioFrame, AudioSource, RelaxableSource

if TYPE_CHECKING:
    from ..ports.wake import WakeWordDetector

__all__ = ["WakeWordSource"]


class WakeWordSource:
    """An AudioSource that listens for the wake word in `source`'s frames while `armed`.

    `on_wake(heard_at)` is called with the capture time of the end of the frame that completed the phrase.
    `detections` and `last_detected_at` (monotonic, when the detector fired) are kept for the console and benches.
    """

    def __init__(self, source: AudioSource, detector: WakeWordDetector, on_wake: Callable[[float], None], *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.detector = detector
        self.on_wake = on_wake
        self.sample_rate_hz = source.sample_rate_hz
        self.frame_ms = source.frame_ms
        self.live_clock = bool(getattr(source, "live_clock", False))
        self.detections = 0
        self.last_detected_at: float | None = None
        self._clock = clock
        self._armed = True
        self._frames: AsyncIterator[AudioFrame] | None = None

    @property
    def armed(self) -> bool:
        """True while frames go to the detector."""
        return self._armed

    def arm(self, armed: bool) -> None:
        """Listen for the wake word (True: no session is open) or not; arming starts from a clean detector."""
        if armed and not self._armed:
            self.detector.reset()
        self._armed = armed

    @property
    def overflows(self) -> int:
        """The microphone's dropped frames."""
        return self.source.overflows

    def __getattr__(self, name: str):
        return getattr(self.source, name)  # the wrapped source's extras (stats, down_s, describe)

    async def start(self) -> None:
        """Start the microphone."""
        await self.source.start()

    async def stop(self) -> None:
        """Stop the microphone."""
        await self.source.stop()

    async def aclose(self) -> None:
        """Close the microphone."""
        await self.source.aclose()

    def relax_delivery(self, relaxed: bool) -> None:
        """Pass the listener's wish on (the detector reads grouped frames just as well)."""
        if isinstance(self.source, RelaxableSource):
            self.source.relax_delivery(relaxed)

    def __aiter__(self) -> AsyncIterator[AudioFrame]:
        return self

    async def __anext__(self) -> AudioFrame:
        if self._frames is None:  # the source's own iterator: a wrapper (the console's meter) may live there
            self._frames = aiter(self.source)
        frame = await anext(self._frames)
        if self._armed and self.detector.process(frame.pcm):
            self.detections += 1
            self.last_detected_at = self._clock()
            self._armed = False  # one wake per session; the session's end arms it again
            self.detector.reset()
            self.on_wake(frame.end_s)
        return frame
