"""The one shape of every stage on the capture path: an AudioSource over another, each frame through `_frame()`.

start/stop/aclose, relaxed delivery and the microphone's own extras (down_s, device_name, xruns) pass through to
the wrapped source, so a stage can sit anywhere between the microphone and the listener.
"""

from __future__ import annotations

from typing import AsyncIterator

from ..ports.audio import AudioFrame, AudioSource, RelaxableSource

__all__ = ["WrappedSource"]


class WrappedSource:
    """An AudioSource over `source`; subclasses say what happens to each frame in `_frame()`."""

    def __init__(self, source: AudioSource) -> None:
        self.source = source
        self.sample_rate_hz = source.sample_rate_hz
        self.frame_ms = source.frame_ms
        self.live_clock = bool(getattr(source, "live_clock", False))
        self._frames: AsyncIterator[AudioFrame] | None = None

    def _frame(self, frame: AudioFrame) -> AudioFrame:
        """What this stage does to one frame (the base passes it on)."""
        return frame

    async def _before(self, frame: AudioFrame) -> None:
        """What this stage waits for before `_frame()` (the base: nothing)."""

    @property
    def overflows(self) -> int:
        """The microphone's dropped frames."""
        return self.source.overflows

    def __getattr__(self, name: str):
        return getattr(self.source, name)  # the wrapped source's extras

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
        if self._frames is None:  # the source's own iterator: a wrapper (the console's meter) may live there
            self._frames = aiter(self.source)
        frame = await anext(self._frames)
        await self._before(frame)
        return self._frame(frame)
