"""The wake word on the capture path: frames pass through unchanged; while armed, each is also given to the
detector, and a detection calls `on_wake` once.

It sits after the echo canceller (the toy saying "okay nabu" in a story must not wake it) and before the listener.
Armed only while no session is open: during a conversation nobody needs the wake word, so it costs nothing then.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from ..ports.audio import AudioFrame, AudioSource
from .wrapped_source import WrappedSource

if TYPE_CHECKING:
    from ..ports.wake import WakeWordDetector

__all__ = ["WakeWordSource"]


class WakeWordSource(WrappedSource):
    """An AudioSource that listens for the wake word in `source`'s frames while `armed`.

    `on_wake(heard_at)` is called with the capture time of the end of the frame that completed the phrase.
    `detections` and `last_detected_at` (monotonic, when the detector fired) are kept for the console and benches.
    """

    def __init__(self, source: AudioSource, detector: WakeWordDetector, on_wake: Callable[[float], None], *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(source)
        self.detector = detector
        self.on_wake = on_wake
        self.detections = 0
        self.last_detected_at: float | None = None
        self._clock = clock
        self._armed = True

    @property
    def armed(self) -> bool:
        """True while frames go to the detector."""
        return self._armed

    def arm(self, armed: bool) -> None:
        """Listen for the wake word (True: no session is open) or not; arming starts from a clean detector."""
        if armed and not self._armed:
            self.detector.reset()
        self._armed = armed

    def _frame(self, frame: AudioFrame) -> AudioFrame:
        if self._armed and self.detector.process(frame.pcm):
            self.detections += 1
            self.last_detected_at = self._clock()
            self._armed = False  # one wake per session; the session's end arms it again
            self.detector.reset()
            self.on_wake(frame.end_s)
        return frame
