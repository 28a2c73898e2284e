"""Device-free audio endpoints shared by the in-memory fakes and the WAV adapters.

`PcmSource` delivers a PCM buffer as AudioFrames (real-time paced, like a mic, or as fast as the consumer
takes them). `RecordingSink` is a speaker that records what it is given, per answer, instantly or paced in
real time so that `flush()` really cuts audio off.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator, Callable

from toy_runtime.ports.audio import AudioFrame

if TYPE_CHECKING:
    from toy_runtime.audio.resample import Resampler

__all__ = ["PcmSource", "RecordingSink", "PlayedChunk", "AnswerFutures"]


class PcmSource:
    """A finite AudioSource over int16 mono PCM, resampled to `sample_rate_hz` and cut into `frame_ms` frames.

    Timestamps are t0 + offset, t0 being the clock at the first frame request after `start()`. With
    `realtime=True` a frame is delivered when a mic would deliver it (after its last sample "was captured"),
    so source times are wall times; otherwise frames come as fast as they are consumed and times are media times.
    A custom `clock` only makes sense without `realtime` (pacing sleeps against it).
    """

    def __init__(
        self,
        pcm: bytes,
        input_rate_hz: int = 16000,
        *,
        sample_rate_hz: int = 16000,
        frame_ms: int = 20,
        realtime: bool = False,
        lead_silence_ms: int = 0,
        tail_silence_ms: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if frame_ms <= 0:
            raise ValueError("frame_ms must be > 0")
        if input_rate_hz != sample_rate_hz:
            from toy_runtime.audio.resample import Resampler  # numpy only when needed (start-up time)

            r = Resampler(input_rate_hz, sample_rate_hz)
            pcm = r.process(pcm) + r.flush()
        self.sample_rate_hz = sample_rate_hz
        self.frame_ms = frame_ms
        self._frame_bytes = sample_rate_hz * frame_ms // 1000 * 2
        lead = b"\0" * (sample_rate_hz * lead_silence_ms // 1000 * 2)
        tail = b"\0" * (sample_rate_hz * tail_silence_ms // 1000 * 2)
        data = lead + bytes(pcm) + tail
        if len(data) % self._frame_bytes:
            data += b"\0" * (self._frame_bytes - len(data) % self._frame_bytes)  # whole frames only
        self._data = data
        self._realtime = realtime
        self._clock = clock
        self._pos = 0
        self._t0: float | None = None
        self._running = asyncio.Event()
        self._closed = False
        self.frames_delivered = 0

    @property
    def overflows(self) -> int:
        """Always 0: nothing is dropped, the consumer sets the pace."""
        return 0

    @property
    def duration_ms(self) -> float:
        """Total length of the audio this source delivers."""
        return len(self._data) / 2 * 1000.0 / self.sample_rate_hz

    async def start(self) -> None:
        """Start (or resume) delivering frames."""
        self._running.set()

    async def stop(self) -> None:
        """Pause delivery; `start()` resumes where it stopped."""
        self._running.clear()

    async def aclose(self) -> None:
        """End iteration."""
        self._closed = True
        self._running.set()  # wake a waiting __anext__ so it can end

    def __aiter__(self) -> AsyncIterator[AudioFrame]:
        return self

    async def __anext__(self) -> AudioFrame:
        if not self._running.is_set():
            await self._running.wait()
        if self._closed or self._pos >= len(self._data):
            raise StopAsyncIteration
        if self._t0 is None:
            self._t0 = self._clock()
        offset_s = self._pos / 2 / self.sample_rate_hz
        ts = self._t0 + offset_s
        if self._realtime:
            delay = ts + self.frame_ms / 1000.0 - self._clock()
            if delay > 0:
                await asyncio.sleep(delay)
            if self._closed:
                raise StopAsyncIteration
        pcm = self._data[self._pos : self._pos + self._frame_bytes]
        self._pos += self._frame_bytes
        self.frames_delivered += 1
        return AudioFrame(pcm=pcm, sample_rate_hz=self.sample_rate_hz, timestamp_s=ts)


class AnswerFutures:
    """First-sample futures per answer id, created on demand, remembered for the last `keep` answers."""

    def __init__(self, keep: int = 64) -> None:
        self._futs: OrderedDict[str, asyncio.Future] = OrderedDict()
        self._keep = keep

    def get(self, answer_id: str) -> asyncio.Future:
        """The future for `answer_id` (created unresolved if new)."""
        fut = self._futs.get(answer_id)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            self._futs[answer_id] = fut
            while len(self._futs) > self._keep:
                self._futs.popitem(last=False)
        return fut

    def resolve(self, answer_id: str, value: float | None) -> None:
        """Set the result unless already set."""
        fut = self.get(answer_id)
        if not fut.done():
            fut.set_result(value)

    def resolve_pending(self, value: float | None = None) -> None:
        """Resolve every unresolved future (used by flush and close: those answers never started)."""
        for fut in self._futs.values():
            if not fut.done():
                fut.set_result(value)


@dataclass(frozen=True)
class PlayedChunk:
    """A piece of audio as a RecordingSink 'played' it."""

    answer_id: str
    pcm: bytes
    sample_rate_hz: int
    written_at: float


class RecordingSink:
    """An AudioSink that records instead of sounding.

    `realtime=False`: each `play()` is 'written' at once. `realtime=True`: a named task plays the queue in
    `block_ms` blocks paced by the clock, so flush() cuts audio mid-chunk and drain() takes as long as the audio.
    Chunks at another rate than `sample_rate_hz` are resampled (None: keep each chunk's rate).
    """

    def __init__(
        self,
        sample_rate_hz: int | None = None,
        *,
        realtime: bool = False,
        block_ms: int = 20,
        max_queued_ms: int = 5000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sample_rate_hz = sample_rate_hz or 0
        self._fixed_rate = sample_rate_hz
        self._realtime = realtime
        self._block_ms = block_ms
        self._max_queued_ms = max_queued_ms
        self._clock = clock
        self.chunks: list[PlayedChunk] = []
        self.flush_count = 0
        self.started = False
        self.closed = False
        self._answers: AnswerFutures | None = None
        self._queue: list[tuple[str, bytes, int]] = []  # (answer_id, pcm, rate) waiting to play
        self._queued_ms = 0.0
        self._changed: asyncio.Condition | None = None
        self._task: asyncio.Task | None = None
        self._resamplers: dict[int, Resampler] = {}

    async def start(self) -> None:
        """Open the 'device' (starts the pacing task in real-time mode)."""
        self._answers = AnswerFutures()
        self._changed = asyncio.Condition()
        self.started = True
        if self._realtime:
            self._task = asyncio.create_task(self._run(), name="recording-sink-playback")

    def _require_started(self) -> None:
        if not self.started or self.closed:
            raise RuntimeError("sink is not started (or already closed)")

    def first_sample(self, answer_id: str) -> asyncio.Future[float | None]:
        """Future for the time the first sample of `answer_id` was written (None if flushed unplayed)."""
        self._require_started()
        assert self._answers is not None
        return self._answers.get(answer_id)

    async def play(self, pcm: bytes, sample_rate_hz: int, answer_id: str = "") -> None:
        """Queue (or, not real-time, record at once) a chunk; waits while more than max_queued_ms is queued."""
        self._require_started()
        assert self._answers is not None and self._changed is not None
        if not pcm:
            return
        rate = sample_rate_hz
        if self._fixed_rate and sample_rate_hz != self._fixed_rate:
            r = self._resamplers.get(sample_rate_hz)
            if r is None:
                from toy_runtime.audio.resample import Resampler  # numpy only when needed (start-up time)

                r = self._resamplers[sample_rate_hz] = Resampler(sample_rate_hz, self._fixed_rate)
            pcm, rate = r.process(pcm), self._fixed_rate
        if not self._realtime:
            now = self._clock()
            self.chunks.append(PlayedChunk(answer_id, bytes(pcm), rate, now))
            self._answers.resolve(answer_id, now)
            return
        ms = len(pcm) / 2 * 1000.0 / rate
        async with self._changed:
            await self._changed.wait_for(lambda: self._queued_ms < self._max_queued_ms or self.closed)
            if self.closed:
                return
            self._queue.append((answer_id, bytes(pcm), rate))
            self._queued_ms += ms
            self._changed.notify_all()

    async def _run(self) -> None:
        assert self._changed is not None and self._answers is not None
        while True:
            async with self._changed:
                await self._changed.wait_for(lambda: bool(self._queue))
                answer_id, pcm, rate = self._queue[0]
                block = rate * self._block_ms // 1000 * 2
                piece, rest = pcm[:block], pcm[block:]
                if rest:
                    self._queue[0] = (answer_id, rest, rate)
                else:
                    self._queue.pop(0)
                self._queued_ms -= len(piece) / 2 * 1000.0 / rate
                now = self._clock()
                self.chunks.append(PlayedChunk(answer_id, piece, rate, now))
                self._answers.resolve(answer_id, now)
                self._changed.notify_all()
            await asyncio.sleep(len(piece) / 2 / rate)
            if self._changed is not None:
                async with self._changed:
                    self._changed.notify_all()  # wakes drain() once the block has 'sounded'

    async def flush(self) -> None:
        """Drop everything queued; the block being played finishes (at most `block_ms`)."""
        self._require_started()
        assert self._changed is not None and self._answers is not None
        self.flush_count += 1
        async with self._changed:
            self._queue.clear()
            self._queued_ms = 0.0
            self._changed.notify_all()
        self._answers.resolve_pending(None)

    async def drain(self) -> None:
        """Wait until the queue is empty and the last block has been 'played'."""
        self._require_started()
        if not self._realtime:
            return
        assert self._changed is not None
        async with self._changed:
            await self._changed.wait_for(lambda: not self._queue or self.closed)
        await asyncio.sleep(self._block_ms / 1000.0)

    async def aclose(self) -> None:
        """Stop; queued audio is dropped. Idempotent."""
        if self.closed:
            return
        self.closed = True
        if self._task is not None:
            self._task.cancel()
            # asyncio.wait does not re-raise the task's CancelledError, but does raise our own cancellation.
            await asyncio.wait([self._task])
        if self._changed is not None:
            async with self._changed:
                self._queue.clear()
                self._changed.notify_all()
        if self._answers is not None:
            self._answers.resolve_pending(None)

    # -- inspection helpers ---------------------------------------------------------------------------

    def answer_ids(self) -> list[str]:
        """Answer ids in the order their first audio was written."""
        seen: list[str] = []
        for c in self.chunks:
            if c.answer_id not in seen:
                seen.append(c.answer_id)
        return seen

    def audio(self, answer_id: str | None = None) -> bytes:
        """The PCM written so far (for one answer, or all)."""
        return b"".join(c.pcm for c in self.chunks if answer_id is None or c.answer_id == answer_id)

    def played_ms(self, answer_id: str | None = None) -> float:
        """Milliseconds of audio written so far (for one answer, or all)."""
        return sum(len(c.pcm) / 2 * 1000.0 / c.sample_rate_hz for c in self.chunks
                   if answer_id is None or c.answer_id == answer_id)
