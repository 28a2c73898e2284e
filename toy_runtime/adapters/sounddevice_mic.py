"""The microphone through PortAudio (sounddevice): fixed-size int16 frames handed to asyncio through a bounded queue.

PortAudio calls `_callback` on its own thread. It never blocks and never touches asyncio objects directly: frames go
to the event loop with `loop.call_soon_threadsafe`, into a bounded queue; when the consumer falls behind the oldest
frame is dropped and counted, so latency stays bounded instead of growing. While the consumer has relaxed the
delivery (`relax_delivery`, a listener waiting for speech), frames are handed over RELAXED_DELIVERY_MS at a time.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, AsyncIterator

from toy_runtime.adapters.sounddevice_base import (close_stream, device_rate, import_sounddevice, open_device,
                                                   open_raw_stream)
from toy_runtime.ports.audio import AudioDeviceError, AudioFrame

if TYPE_CHECKING:
    from toy_runtime.audio.resample import Resampler

__all__ = ["RELAXED_DELIVERY_MS", "SoundDeviceSource"]

# While relaxed, frames go to the event loop in groups of at least this much audio: one loop wake-up per ~100 ms
# instead of one per callback (40 ms), measured as half the event loop's idle CPU. The start of speech is seen up to
# this much later; nothing that follows it is (the listener asks for every frame at once from the first speech frame).
RELAXED_DELIVERY_MS = 100


class SoundDeviceSource:
    """A PortAudio microphone delivering 16 kHz (or `sample_rate_hz`) mono int16 frames of `frame_ms` ms.

    `device` is an index, a name substring (sounddevice's matching) or None for the default input. If the device
    cannot capture at `sample_rate_hz` (or `device_rate_hz` is given), it is opened at its default rate (or
    `device_rate_hz`) and resampled in the callback. `queue_frames` bounds the hand-over queue (100 × 20 ms = 2 s).
    `block_frames` frames are captured per PortAudio callback (one loop wake-up each): 2 roughly halves the
    capture overhead of idle listening at the cost of up to one more frame of latency.
    Timestamps estimate when each frame's first sample hit the ADC (PortAudio timing info, else block length),
    on `time.monotonic()` (`live_clock`).
    """

    live_clock = True  # frame timestamps are time.monotonic() seconds: a listener can measure its capture lag

    def __init__(
        self,
        device: int | str | None = None,
        *,
        sample_rate_hz: int = 16000,
        frame_ms: int = 20,
        queue_frames: int = 100,
        latency: str | float = "low",
        device_rate_hz: int | None = None,
        block_frames: int = 1,
    ) -> None:
        if frame_ms not in (10, 20, 30):
            raise ValueError("frame_ms must be 10, 20 or 30 (webrtcvad frame sizes)")
        if block_frames < 1:
            raise ValueError("block_frames must be >= 1")
        self.block_frames = block_frames
        self.device = device
        self.sample_rate_hz = sample_rate_hz
        self.frame_ms = frame_ms
        self._forced_rate = device_rate_hz  # capture at this rate and resample (None: decide from the device)
        self.device_rate_hz = 0  # known after start()
        self.device_name = ""
        self.xruns = 0  # input overflows PortAudio reported (audio lost before it reached us)
        self._frame_bytes = sample_rate_hz * frame_ms // 1000 * 2
        self._queue: asyncio.Queue[AudioFrame | None] = asyncio.Queue(maxsize=queue_frames)
        self._latency = latency
        self._overflows = 0
        self._stream: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._resampler: Resampler | None = None
        self._acc = bytearray()  # callback thread only
        self._samples_out = 0  # callback thread only: the next frame's first_sample (lost audio included)
        self._next_adc = 0.0  # callback thread only: the ADC time the next block should start at
        self._held: list[AudioFrame] = []  # callback thread only (and start(), while the stream is stopped)
        self._relaxed = False  # set by the loop, read by the callback: a bool store is atomic
        self._relaxed_frames = max(1, -(-RELAXED_DELIVERY_MS // frame_ms))
        self._closed = False
        self._want_running = False
        self._run_generation = 0  # bumped by every start(); a finished notice from an earlier run is stale
        self._error: AudioDeviceError | None = None

    @property
    def overflows(self) -> int:
        """Frames dropped because the consumer fell behind (oldest dropped first)."""
        return self._overflows

    async def start(self) -> None:
        """Open the device on first call, then start capturing."""
        if self._closed:
            raise RuntimeError("source is closed")
        self._loop = asyncio.get_running_loop()
        if self._stream is None:
            self._stream = await asyncio.to_thread(self._open)
        if not self._stream.active:
            self._held = []  # frames held back before a stop are stale now
            await asyncio.to_thread(self._stream.start)
        self._run_generation += 1
        self._want_running = True

    def _open(self) -> Any:
        sd = import_sounddevice()
        return open_device(sd, self.device, "input", lambda info: self._open_on(sd, info))

    def _open_on(self, sd: Any, info: dict) -> Any:
        rate = self._forced_rate or device_rate(sd, info, self.sample_rate_hz, "input")
        self.device_rate_hz = rate
        self.device_name = str(info["name"])
        self._resampler = None
        if rate != self.sample_rate_hz:
            # numpy (~0.1 s to import) is only needed when the device cannot run at our rate: keep it off start-up
            from toy_runtime.audio.resample import Resampler

            self._resampler = Resampler(rate, self.sample_rate_hz)
        return open_raw_stream(sd, "input", info, rate=rate, blocksize=rate * self.frame_ms // 1000 * self.block_frames,
                               latency=self._latency, callback=self._callback, finished_callback=self._finished)

    def _callback(self, indata: Any, frames: int, time_info: Any, status: Any) -> None:
        # PortAudio thread: no blocking, no asyncio objects.
        now = time.monotonic()
        adc = time_info.inputBufferAdcTime
        if status.input_overflow:
            self.xruns += 1
            # audio the device lost before this block: counted into the sample index (the echo reference skips
            # the same render exactly); the partial frame before the loss is dropped with it, so no frame
            # straddles the hole. Only with the device's ADC times (0 from some hosts: then unknown)
            lost_s = adc - self._next_adc if adc > 0 and self._next_adc > 0 else 0.0
            if 0.0 < lost_s < 5.0:
                self._samples_out += len(self._acc) // 2 + round(lost_s * self.sample_rate_hz)
                self._acc.clear()
        self._next_adc = adc + frames / self.device_rate_hz if adc > 0 else 0.0
        delay = time_info.currentTime - adc
        if not 0.0 < delay < 1.0:
            delay = frames / self.device_rate_hz
        block_end = now - delay + frames / self.device_rate_hz
        data = bytes(indata)
        if self._resampler is not None:
            data = self._resampler.process(data)
            block_end -= self._resampler.delay_samples / self.device_rate_hz
        self._acc += data
        fb = self._frame_bytes
        n = len(self._acc) // fb
        if n == 0:
            return
        out = []
        total = len(self._acc)
        for i in range(n):
            remaining = (total - i * fb) // 2  # samples from this frame's start to the end of the block
            pcm = bytes(self._acc[i * fb : (i + 1) * fb])
            out.append(AudioFrame(pcm, self.sample_rate_hz, block_end - remaining / self.sample_rate_hz,
                                  first_sample=self._samples_out))
            self._samples_out += fb // 2
        del self._acc[: n * fb]
        if self._held or self._relaxed:
            self._held.extend(out)
            if self._relaxed and len(self._held) < self._relaxed_frames:
                return  # nobody needs these yet: handed over with the next ones
            out, self._held = self._held, []
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._deliver, out)
            except RuntimeError:  # loop closed while the stream winds down
                pass

    def relax_delivery(self, relaxed: bool) -> None:
        """Hand frames over in groups of RELAXED_DELIVERY_MS (True) or each callback's at once (False, default)."""
        self._relaxed = relaxed

    def _deliver(self, frames: list[AudioFrame]) -> None:
        for frame in frames:
            if self._closed:
                return
            if self._queue.full():
                self._queue.get_nowait()  # drop the oldest: fresh audio matters more than old audio
                self._overflows += 1
            self._queue.put_nowait(frame)

    def _finished(self) -> None:
        # Called by PortAudio when the stream stops for any reason; only unexpected ends are errors.
        loop = self._loop
        if loop is None or self._closed:
            return
        try:
            loop.call_soon_threadsafe(self._on_finished, self._run_generation)
        except RuntimeError:
            pass

    def _on_finished(self, generation: int) -> None:
        # A normal stop() also ends here; only a stream that died while we wanted audio is an error. The stream's
        # `active` flag cannot tell (PortAudio's ALSA backend calls this before clearing it), so a run generation
        # does: a notice from before the latest start() is stale.
        if self._closed or not self._want_running or self._stream is None or generation != self._run_generation:
            return
        self._error = AudioDeviceError("device-lost", f"input stream on {self.device_name!r} ended unexpectedly")
        self._push_end()

    def _push_end(self) -> None:
        if self._queue.full():
            self._queue.get_nowait()
        self._queue.put_nowait(None)

    async def stop(self) -> None:
        """Stop capturing (the device stays open); frames already queued remain readable."""
        if self._stream is not None and not self._closed:
            self._want_running = False
            await asyncio.to_thread(self._stream.stop)

    async def aclose(self) -> None:
        """Close the device and end iteration. Idempotent."""
        if self._closed:
            return
        self._closed = True
        stream, self._stream = self._stream, None
        try:
            if stream is not None:
                await asyncio.to_thread(close_stream, stream)
        finally:
            self._push_end()

    def __aiter__(self) -> AsyncIterator[AudioFrame]:
        return self

    async def __anext__(self) -> AudioFrame:
        frame = await self._queue.get()
        if frame is None:
            self._queue.put_nowait(None)  # keep the end marker for any other reader
            if self._error is not None:
                raise self._error
            raise StopAsyncIteration
        return frame
