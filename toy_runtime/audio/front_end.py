"""The slot between the microphone and the listener where the front end (echo canceller, noise suppression) goes.

The listener is built on it before READY and it passes frames through until `install()` puts the front end in.
The canceller, its native library and numpy load after READY, before the voice (app/voice_app.py): the toy cannot
play a sound before its voice has loaded, so until then there is no echo to cancel — and listening starts ~0.1 s
sooner (numpy stays off the listening path, tests/audio/test_run_startup.py).
"""

from __future__ import annotations

from typing import Protocol

from ..ports.audio import AudioFrame, AudioSource
from .wrapped_source import WrappedSource

__all__ = ["FrontEndSource"]


class FrameProcessor(Protocol):
    """What goes into the slot: one captured frame in, the processed frame out (same length; dated `delay_s`
    earlier, by what it carries)."""

    delay_s: float  # how long after the capture what it returns was heard: its algorithms' own delay

    def clean(self, frame: AudioFrame) -> AudioFrame: ...

    async def await_render(self, samples: int) -> None:
        """Wait, briefly, until what it needs beside the next `samples` of capture is there (the speaker's render)."""
        ...

    def describe(self) -> str: ...


class FrontEndSource(WrappedSource):
    """An AudioSource: `source`'s frames, through the installed processor once there is one."""

    def __init__(self, source: AudioSource, *, pending: str = "loading") -> None:
        super().__init__(source)
        self.processor: FrameProcessor | None = None
        self._pending = pending

    def install(self, processor: FrameProcessor) -> None:
        """Put the front end in: from the next frame on, every frame goes through it."""
        self.processor = processor

    @property
    def delay_s(self) -> float:
        """How much later than it was spoken the installed front end hands a sound on (0 before it is in)."""
        return self.processor.delay_s if self.processor is not None else 0.0

    def describe(self) -> str:
        """The installed front end's line, or that it is still loading."""
        return self.processor.describe() if self.processor is not None else f"echo cancellation: {self._pending}"

    async def _before(self, frame: AudioFrame) -> None:
        if self.processor is not None:
            await self.processor.await_render(len(frame.pcm) // 2)

    def _frame(self, frame: AudioFrame) -> AudioFrame:
        processor = self.processor
        return frame if processor is None else processor.clean(frame)
