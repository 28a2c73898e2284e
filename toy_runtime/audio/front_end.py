"""The slot between the microphone and the listener where the front end (echo canceller, noise suppression) goes.

The listener is built on it before READY and it passes frames through until `install()` puts the front end in.
The canceller, its native library and numpy load after READY, before the voice (app/voice.py): the toy cannot
play a sound before its voice has loaded, so until then there is no echo to cancel — and listening starts ~0.1 s
sooner (numpy stays off the listening path, tests/audio/test_run_startup.py).
"""

from __future__ import annotations

from typing import AsyncIterator, Protocol

from ..ports.audio import AudioFrame, AudioSource, RelaxableSource

__all__ = ["FrontEndSource"]


class FrameProcessor(Protocol):
    """What goes into the slot: one captured frame in, the processed frame out (same length and time)."""

    def clean(self, frame: AudioFrame) -> AudioFrame: ...

    def describe(self) -> str: ...


class FrontEndSource:
    """An AudioSource: `source`'s frames, through the installed processor once there is one."""

    def __init__(self, source: AudioSource, *, pending: str = "loading") -> None:
        self.source = source
        self.sample_rate_hz = source.sample_rate_hz
        self.frame_ms = source.frame_ms
        self.live_clock = bool(getattr(source, "live_clock", False))
        self.processor: FrameProcessor | None = None
        self._pending = pending
        self._frames: AsyncIterator[AudioFrame] | None = None

    def install(self, processor: FrameProcessor) -> None:
        """Put the front end in: from the next frame on, every frame goes through it."""
        self.processor = processor

    def describe(self) -> str:
        """The installed front end's line, or that it is still loading."""
        return self.processor.describe() if self.processor is not None else f"echo cancellation: {self._pending}"

    @property
    def overflows(self) -> int:
        """The microphone's dropped frames."""
        return self.source.overflows

    def __getattr__(self, name: str):
        return getattr(self.source, name)  # the microphone's extras (down_s, device_name, xruns)

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
        """Pass the listener's wish on to a microphone that can group its frames."""
        if isinstance(self.source, RelaxableSource):
            self.source.relax_delivery(relaxed)

    def __aiter__(self) -> AsyncIterator[AudioFrame]:
        return self

    async def __anext__(self) -> AudioFrame:
        if self._frames is None:
            self._frames = aiter(self.source)
        frame = await anext(self._frames)
        processor = self.processor
        return frame if processor is None else processor.clean(frame)
