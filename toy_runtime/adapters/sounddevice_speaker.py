"""The speaker through PortAudio (sounddevice): a bounded play queue, one-block interruption, first-sample times.

PortAudio calls `_callback` on its own thread. It only takes the lock around a deque, copies at most one block, and
reports to the event loop with `loop.call_soon_threadsafe` only when there is something to report, so an idle
speaker costs no loop wake-ups.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Any

from toy_runtime.adapters.sounddevice_base import (ALSA_ERRORS, close_stream, device_rate, import_sounddevice,
                                                   open_device, open_raw_stream)
from toy_runtime.audio.pcm_io import AnswerFutures
from toy_runtime.ports.audio import AudioDeviceError

if TYPE_CHECKING:
    from toy_runtime.audio.echo_reference import EchoReference
    from toy_runtime.audio.resample import Resampler

__all__ = ["SoundDeviceSink"]

log = logging.getLogger(__name__)


class SoundDeviceSink:
    """A PortAudio speaker with a bounded queue, one-block interruption and first-sample timestamps.

    The stream runs from `start()` to `aclose()` and writes silence when there is nothing to play, so the start
    of an answer is never clipped by stream start-up. Chunks at another rate than the stream's are resampled
    (one streaming resampler per input rate). Blocks are `block_ms` long: `flush()` takes effect at the next
    block. `drain()` returns once the queue is empty and `tail_pad_ms` of silence followed the last sample.
    `reference` (optional) receives every block written, with the time it is heard, for the echo canceller.
    `sample_rate_hz` is the stream rate to ask for (None: the device default); a device that refuses it is opened
    at its default rate and everything is resampled. Answer ids must be unique per answer: the first-sample time
    is reported once per id, and `flush()` resolves (with None) every answer that has not started yet.
    """

    def __init__(
        self,
        device: int | str | None = None,
        *,
        sample_rate_hz: int | None = 22050,
        block_ms: int = 10,
        max_queued_ms: int = 5000,
        tail_pad_ms: int = 50,
        latency: str | float = "low",
        reference: EchoReference | None = None,
    ) -> None:
        self.device = device
        self._reference = reference  # every block written is reported here: the echo canceller's far end
        if reference is not None:  # queued audio is the render to come: the canceller's side waits for it
            reference.audio_pending = lambda: bool(self._items)
        self.sample_rate_hz = sample_rate_hz or 0  # the stream's rate; known after start() if None
        self._wanted_rate = sample_rate_hz
        self.block_ms = block_ms
        self.device_name = ""
        self.underruns = 0  # every PortAudio output underflow, silence included
        self.underruns_while_playing = 0  # those that could be heard: answer audio was queued or playing
        # pieces of an answer that came after its audio so far had all played (silence was heard in between): a
        # synthesizer late for its own answer, heard as a stutter inside a sentence or a long pause between two
        self.gaps_in_answers = 0
        self.lead_ins = 0  # answers started after a lead-in of silence (_lead_in)
        self._max_queued_ms = max_queued_ms
        self._tail_pad_ms = tail_pad_ms
        self._latency = latency
        self._stream: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        # Shared with the callback thread, under _lock:
        self._items: deque[list] = deque()  # [answer_id, bytes, offset]
        self._queued_bytes = 0
        self._playing_answer: str | None = None  # the answer whose audio the last block ended with
        self._ran_dry: str | None = None  # the answer whose audio ran out, silence followed, nothing else came yet
        self._play_gen = 0
        self._flush_gen = 0
        self._space_wanted = False
        # Callback thread only:
        self._silence_run = 0
        self._last_block_audible = False  # the previous block carried answer audio
        self._idle_reported = -1
        self._flush_seen = 0
        self._announced: OrderedDict[str, None] = OrderedDict()
        # Loop side:
        self._answers: AnswerFutures | None = None
        self._idle = asyncio.Event()
        self._space = asyncio.Event()
        self._flush_waiters: dict[int, asyncio.Future] = {}
        self._resamplers: dict[int, Resampler] = {}
        self._last_answer: str | None = None
        self._closed = False
        self._error: AudioDeviceError | None = None
        self._alsa_xruns_at_open = 0

    async def start(self) -> None:
        """Open the device and start the (initially silent) stream."""
        if self._closed:
            raise RuntimeError("sink is closed")
        if self._stream is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._answers = AnswerFutures()
        self._idle.set()
        self._stream = await asyncio.to_thread(self._open)
        await asyncio.to_thread(self._stream.start)

    def _open(self) -> Any:
        sd = import_sounddevice()
        ALSA_ERRORS.install()  # xruns counted and reported once at close, not printed per event
        self._alsa_xruns_at_open = ALSA_ERRORS.xruns
        return open_device(sd, self.device, "output", lambda info: self._open_on(sd, info))

    def _open_on(self, sd: Any, info: dict) -> Any:
        wanted = self._wanted_rate or int(info["default_samplerate"])
        rate = device_rate(sd, info, wanted, "output")
        self.sample_rate_hz = rate
        self.device_name = str(info["name"])
        return open_raw_stream(sd, "output", info, rate=rate, blocksize=max(1, rate * self.block_ms // 1000),
                               latency=self._latency, callback=self._callback, finished_callback=self._finished)

    # -- PortAudio thread ---------------------------------------------------------------------------------

    def _callback(self, outdata: Any, frames: int, time_info: Any, status: Any) -> None:
        now = time.monotonic()
        if status.output_underflow:
            self.underruns += 1
            if self._items or self._last_block_audible:  # answer audio was queued or just playing: heard as a gap
                self.underruns_while_playing += 1
        # When this block's first sample reaches the DAC (PortAudio's estimate, the device's own buffering): the
        # first-sample time is when the answer becomes audible, not when it was copied into the buffer.
        delay = time_info.outputBufferDacTime - time_info.currentTime
        if 0.0 < delay < 1.0:
            now += delay
        need = frames * 2
        pos = 0
        events: list[tuple] = []
        rate = self.sample_rate_hz
        with self._lock:
            while pos < need and self._items:
                item = self._items[0]
                answer_id, data, off = item
                if answer_id is None:  # a lead-in of silence (_lead_in): not the answer's first sample
                    pass
                elif off == 0 and answer_id not in self._announced:
                    self._announced[answer_id] = None
                    if len(self._announced) > 64:
                        self._announced.popitem(last=False)
                    events.append(("first", answer_id, now + pos / 2 / rate))
                take = min(need - pos, len(data) - off)
                outdata[pos : pos + take] = data[off : off + take]
                pos += take
                if answer_id is not None:
                    self._playing_answer = answer_id
                if off + take >= len(data):
                    self._items.popleft()
                else:
                    item[2] = off + take
            self._queued_bytes -= pos
            self._last_block_audible = pos > 0
            if pos < need:
                outdata[pos:need] = bytes(need - pos)
                if self._playing_answer is not None:
                    self._ran_dry, self._playing_answer = self._playing_answer, None
                self._silence_run = (need - pos) // 2 if pos else self._silence_run + frames
            else:
                self._silence_run = 0
            if (not self._items and self._idle_reported != self._play_gen
                    and self._silence_run * 1000 >= self._tail_pad_ms * rate):
                self._idle_reported = self._play_gen
                events.append(("idle", self._play_gen))
            if self._flush_seen != self._flush_gen:
                self._flush_seen = self._flush_gen
                events.append(("flushed", self._flush_gen))
            if self._space_wanted and pos:
                events.append(("space",))
        if self._reference is not None:  # silence too: the canceller's timeline must not skip
            self._reference.played(bytes(outdata[:need]), rate, now, after_underflow=bool(status.output_underflow))
        if events and self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._on_events, events)
            except RuntimeError:
                pass

    def _finished(self) -> None:
        if self._loop is None or self._closed:
            return
        try:
            self._loop.call_soon_threadsafe(self._on_died)
        except RuntimeError:
            pass

    # -- loop side ------------------------------------------------------------------------------------------

    def _on_events(self, events: list[tuple]) -> None:
        for ev in events:
            kind = ev[0]
            if kind == "first" and self._answers is not None:
                self._answers.resolve(ev[1], ev[2])
            elif kind == "idle" and ev[1] == self._play_gen:
                self._idle.set()
            elif kind == "flushed":
                for gen in [g for g in self._flush_waiters if g <= ev[1]]:
                    fut = self._flush_waiters.pop(gen)
                    if not fut.done():
                        fut.set_result(None)
            elif kind == "space":
                self._space.set()

    def _on_died(self) -> None:
        if self._closed:
            return
        self._error = AudioDeviceError("device-lost", f"output stream on {self.device_name!r} ended unexpectedly")
        self._wake_all()

    def _wake_all(self) -> None:
        self._idle.set()
        self._space.set()
        for fut in self._flush_waiters.values():
            if not fut.done():
                fut.set_result(None)
        self._flush_waiters.clear()
        if self._answers is not None:
            self._answers.resolve_pending(None)

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed or self._stream is None:
            raise RuntimeError("sink is not started (or already closed)")

    def first_sample(self, answer_id: str) -> asyncio.Future[float | None]:
        """Future for the monotonic time the first sample of `answer_id` reaches the DAC (PortAudio's estimate of when
        it is heard; None if flushed unplayed)."""
        self._check()
        assert self._answers is not None
        return self._answers.get(answer_id)

    async def play(self, pcm: bytes, sample_rate_hz: int, answer_id: str = "") -> None:
        """Queue a chunk; waits (in ~1 s pieces) while `max_queued_ms` of audio is already queued."""
        self._check()
        assert self._answers is not None
        self._answers.get(answer_id)  # so first_sample() asked later still resolves
        data = self._convert(bytes(pcm), sample_rate_hz, answer_id)
        lead_in = self._lead_in() if not self._items and not self._last_block_audible else b""  # idle only
        piece = self.sample_rate_hz * 2  # 1 s
        max_bytes = self.sample_rate_hz * 2 * self._max_queued_ms // 1000
        for i in range(0, len(data), piece):
            while True:
                self._check()
                with self._lock:
                    if self._queued_bytes < max_bytes:
                        if i == 0:
                            if self._ran_dry == answer_id:
                                self.gaps_in_answers += 1
                            self._ran_dry = None
                            if lead_in and not self._items and not self._last_block_audible:
                                self._items.append([None, lead_in, 0])
                                self._queued_bytes += len(lead_in)
                                self.lead_ins += 1
                        chunk = data[i : i + piece]
                        self._items.append([answer_id, chunk, 0])
                        self._queued_bytes += len(chunk)
                        self._play_gen += 1
                        self._space_wanted = False
                        break
                    self._space_wanted = True
                    self._space.clear()
                await self._space.wait()
            self._idle.clear()

    def _lead_in(self) -> bytes:
        """Silence to start an answer with when the speaker is idle: as much as the echo reference has already handed
        the canceller, as silence, beyond what this speaker reported (EchoReference.handed_ahead_s; at most 100 ms),
        so the answer's first sound is never heard where the canceller was told nothing played. On the echo rig the
        capture came to read 10-17 ms past the reports late in long runs, and AEC3 let those onsets through into
        false barge-ins (docs/benchmarks.md, "Ears", ninth round). Usually none."""
        if self._reference is None:
            return b""
        ahead = min(self._reference.handed_ahead_s(), 0.1)
        if ahead <= 0.0:
            return b""
        return bytes(2 * math.ceil((ahead + 0.002) * self.sample_rate_hz))  # + the reference resampler's hold

    def _convert(self, pcm: bytes, rate: int, answer_id: str) -> bytes:
        if rate == self.sample_rate_hz:
            return pcm
        r = self._resamplers.get(rate)
        if r is None:
            # numpy (~0.1 s to import) is only needed when the device cannot run at our rate: keep it off start-up
            from toy_runtime.audio.resample import Resampler

            r = self._resamplers[rate] = Resampler(rate, self.sample_rate_hz)
        tail = b""
        if self._last_answer is not None and self._last_answer != answer_id:
            # A new answer: emit the previous one's last ~1 ms and start without its filter history.
            tail = r.flush()
        self._last_answer = answer_id
        return tail + r.process(pcm)

    async def flush(self) -> None:
        """Drop all queued audio; returns after the callback has produced its next block (without it)."""
        self._check()
        assert self._loop is not None and self._answers is not None
        with self._lock:
            self._items.clear()
            self._queued_bytes = 0
            self._playing_answer = self._ran_dry = None
            self._flush_gen += 1
            gen = self._flush_gen
            self._play_gen += 1
        for r in self._resamplers.values():
            r.reset()
        self._answers.resolve_pending(None)
        self._space.set()
        fut = self._loop.create_future()
        self._flush_waiters[gen] = fut
        try:
            # A running stream answers within one block; the timeout only guards a stalled device.
            await asyncio.wait_for(fut, timeout=max(0.5, 20 * self.block_ms / 1000))
        except asyncio.TimeoutError:
            self._flush_waiters.pop(gen, None)
        self._idle.set()

    async def drain(self) -> None:
        """Wait until everything queued has been written, followed by `tail_pad_ms` of silence."""
        self._check()
        await self._idle.wait()
        if self._error is not None:
            raise self._error

    async def aclose(self) -> None:
        """Stop the stream and release the device; queued audio is dropped. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            self._items.clear()
            self._queued_bytes = 0
        stream, self._stream = self._stream, None
        try:
            if stream is not None:
                await asyncio.to_thread(close_stream, stream)
        finally:
            self._wake_all()
        if stream is not None and (self.underruns or self.alsa_xruns or self.gaps_in_answers):
            # most happen in the silence between answers (the stream keeps running so an answer starts at once, and
            # its callback may wait for the interpreter lock while the recognizer decodes): said apart, once
            log.warning("audio output %r: %d underruns (PortAudio; %d while answer audio played), %d gaps inside "
                        "answers and %d ALSA xrun recoveries while open", self.device_name, self.underruns,
                        self.underruns_while_playing, self.gaps_in_answers, self.alsa_xruns)

    @property
    def alsa_xruns(self) -> int:
        """xruns alsa-lib recovered (process-wide: the mic's overruns count too) since this sink opened."""
        return ALSA_ERRORS.xruns - self._alsa_xruns_at_open

    @property
    def queued_ms(self) -> float:
        """Audio queued and not yet written to the device."""
        return self._queued_bytes / 2 * 1000.0 / self.sample_rate_hz if self.sample_rate_hz else 0.0
