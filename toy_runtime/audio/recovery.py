"""Device recovery for the audio ports: a mic and a speaker that re-open their device after it was lost.

An unplugged USB mic or speaker ends the sounddevice adapters' stream with AudioDeviceError("device-lost"); a device
whose driver simply stops delivering (a stalled USB device, a suspended PulseAudio source) raises nothing at all.
`ReopeningSource` and `ReopeningSink` wrap an adapter *factory*: on either kind of loss they close the dead adapter,
build a fresh one and start it, waiting `initial_backoff_s`, then twice as long each time up to `max_backoff_s`
between attempts (a device that is away for a minute costs a few dozen cheap open attempts, not a busy loop).

Audio that was queued or captured while the device was away is lost: a mic delivers nothing in between, a speaker
drops what it had queued (its `first_sample` futures resolve None) and the next chunk plays on the new device.

Every loss, failed attempt, recovery and give-up is reported to `on_event` as a `RecoveryEvent` (the composition root
can put them in the audit log). Nothing here imports a device library: the factory does.

    mic = ReopeningSource(lambda: SoundDeviceSource(device, ...), on_event=report)
    speaker = ReopeningSink(lambda: SoundDeviceSink(device, ...), on_event=report)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Literal

from toy_runtime.ports.audio import AudioDeviceError, AudioFrame, AudioSink, AudioSource, RelaxableSource

__all__ = ["RecoveryEvent", "ReopeningSource", "ReopeningSink", "backoff_delays"]

log = logging.getLogger(__name__)

EventKind = Literal["lost", "retry", "recovered", "gave_up"]


@dataclass(frozen=True)
class RecoveryEvent:
    """One step of a device recovery: `lost` → (`retry`)* → `recovered` | `gave_up`."""

    kind: EventKind
    role: str  # "mic" / "speaker" (the wrapper's `name`)
    code: str  # the AudioDeviceError code that caused it ("device-lost", "device-stalled", "device-open-failed"...)
    message: str
    attempt: int  # open attempts so far in this recovery (0 for `lost`)
    down_s: float  # seconds since the loss was noticed


def backoff_delays(initial_s: float, max_s: float, factor: float = 2.0):
    """initial_s, initial_s·factor, … capped at max_s, forever."""
    delay = initial_s
    while True:
        yield delay
        delay = min(delay * factor, max_s)


def _relax(source: AudioSource, relaxed: bool) -> None:
    if isinstance(source, RelaxableSource):
        source.relax_delivery(relaxed)


def _as_device_error(exc: BaseException) -> AudioDeviceError:
    if isinstance(exc, AudioDeviceError):
        return exc
    return AudioDeviceError("device-lost", f"{type(exc).__name__}: {exc}")


class _Reopener:
    """The shared retry loop: build → start until it works, the wrapper closes, or `max_attempts` is used up."""

    def __init__(self, name: str, initial_backoff_s: float, max_backoff_s: float, max_attempts: int | None,
                 retry_on: tuple[type[BaseException], ...], on_event: Callable[[RecoveryEvent], None] | None) -> None:
        if initial_backoff_s < 0 or max_backoff_s < initial_backoff_s:
            raise ValueError("need 0 <= initial_backoff_s <= max_backoff_s")
        if max_attempts is not None and max_attempts < 1:
            raise ValueError("max_attempts must be >= 1 (or None: forever)")
        self.name = name
        self.initial_backoff_s = initial_backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_attempts = max_attempts
        self.retry_on = retry_on
        self.on_event = on_event
        self.recoveries = 0
        self.closing = asyncio.Event()

    def emit(self, kind: EventKind, err: AudioDeviceError, attempt: int, since: float) -> None:
        event = RecoveryEvent(kind, self.name, err.code, err.message, attempt, round(time.monotonic() - since, 3))
        level = logging.INFO if kind == "recovered" else logging.WARNING
        log.log(level, "%s %s (%s) attempt %d after %.1f s: %s", self.name, kind, event.code, attempt,
                event.down_s, event.message)
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # a broken reporter must not stop the recovery
                log.exception("recovery event handler failed")

    async def reopen(self, cause: AudioDeviceError, build: Callable[[], Any], open_: Callable[[Any], Any],
                     discard: Callable[[Any], Any]) -> Any | None:
        """A started replacement, or None if the wrapper was closed meanwhile. Raises AudioDeviceError on give-up."""
        since = time.monotonic()
        self.emit("lost", cause, 0, since)
        last = cause
        delays = backoff_delays(self.initial_backoff_s, self.max_backoff_s)
        attempt = 0
        while not self.closing.is_set():
            attempt += 1
            with contextlib.suppress(TimeoutError):  # the backoff wait, cut short by aclose()
                await asyncio.wait_for(self.closing.wait(), next(delays))
            if self.closing.is_set():
                return None
            candidate = build()
            try:
                await open_(candidate)
            except self.retry_on as exc:
                await discard(candidate)
                last = _as_device_error(exc)
                self.emit("retry", last, attempt, since)
                if self.max_attempts is not None and attempt >= self.max_attempts:
                    self.emit("gave_up", last, attempt, since)
                    raise AudioDeviceError(
                        last.code, f"{self.name} did not come back after {attempt} attempts "
                        f"({time.monotonic() - since:.1f} s): {last.message}") from exc
                continue
            except BaseException:
                await discard(candidate)
                raise
            if self.closing.is_set():  # closed while the device was opening
                await discard(candidate)
                return None
            self.recoveries += 1
            self.emit("recovered", cause, attempt, since)
            return candidate
        return None


CLOSE_TIMEOUT_S = 2.0


async def _close_quietly(device: Any) -> None:
    # The device is already dead or unwanted: its own close errors say nothing new. A close that hangs (seen:
    # PortAudio's ALSA thread spinning on a vanished PulseAudio stream, so abort never joins it) is abandoned
    # rather than leaving the toy deaf or mute for good.
    try:
        await asyncio.wait_for(device.aclose(), CLOSE_TIMEOUT_S)
    except asyncio.CancelledError:
        raise
    except TimeoutError:
        log.warning("closing a lost audio device did not finish within %.1f s; abandoned", CLOSE_TIMEOUT_S)
    except Exception:
        log.debug("closing a lost audio device failed", exc_info=True)


class ReopeningSource:
    """An AudioSource that survives its device going away: a mic adapter from `factory`, re-built on loss.

    Loss = the adapter raising one of `retry_on` (default AudioDeviceError) from iteration, or ending without being
    closed, or — while started — delivering no frame for `stall_timeout_s` (None: no stall watchdog). Recovery
    retries forever by default (`max_attempts=None`): a toy should hear again whenever its mic is plugged back in.
    On give-up iteration raises AudioDeviceError (and keeps raising it). The first `start()` is not retried, so a
    mic that is missing at start-up fails fast. `start`/`stop`/`aclose` may be called from other tasks.
    """

    def __init__(
        self,
        factory: Callable[[], AudioSource],
        *,
        name: str = "mic",
        initial_backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
        max_attempts: int | None = None,
        stall_timeout_s: float | None = 3.0,
        retry_on: tuple[type[BaseException], ...] = (AudioDeviceError,),
        on_event: Callable[[RecoveryEvent], None] | None = None,
    ) -> None:
        self._factory = factory
        self._inner = factory()  # adapters open their device in start(), so building one is cheap
        self.sample_rate_hz = self._inner.sample_rate_hz
        self.frame_ms = self._inner.frame_ms
        self.live_clock = bool(getattr(self._inner, "live_clock", False))  # every adapter from `factory` alike
        self.stall_timeout_s = stall_timeout_s
        self._re = _Reopener(name, initial_backoff_s, max_backoff_s, max_attempts, retry_on, on_event)
        self._running = False
        self._closed = False
        self._failed: AudioDeviceError | None = None
        self._retired_overflows = 0
        self._recovering = False
        self._down_since: float | None = None
        self._relaxed = False  # the consumer's delivery wish, given to every replacement too

    @property
    def down_s(self) -> float | None:
        """Seconds since the device was lost while it is still away (None while it delivers, is idle or closed).

        The service watchdog pings only while this is None, so a toy that stays deaf is restarted by systemd.
        """
        if self._down_since is None or self._closed:
            return None
        return time.monotonic() - self._down_since

    @property
    def inner(self) -> AudioSource:
        """The adapter currently in use (replaced on every recovery)."""
        return self._inner

    @property
    def recoveries(self) -> int:
        """How many times the device was re-opened."""
        return self._re.recoveries

    @property
    def overflows(self) -> int:
        """Frames dropped by this and all earlier adapters because the consumer fell behind."""
        return self._retired_overflows + self._inner.overflows

    def relax_delivery(self, relaxed: bool) -> None:
        """Passed on to the adapter (if it can group its frames: ports.audio.RelaxableSource), now and after every
        recovery."""
        self._relaxed = relaxed
        _relax(self._inner, relaxed)

    async def start(self) -> None:
        """Open the device (if needed) and start delivering frames; errors on this call are not retried."""
        if self._closed:
            raise RuntimeError("source is closed")
        self._running = True
        if not self._recovering:  # else the recovery starts the replacement once it has one
            await self._inner.start()

    async def stop(self) -> None:
        """Stop delivering frames (the device stays open); no stall watchdog while stopped."""
        self._running = False
        with contextlib.suppress(*self._re.retry_on):  # stopping a dead device: recovery happens on next read
            await self._inner.stop()

    async def aclose(self) -> None:
        """Release the device, end iteration, and cut any recovery short. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._running = False
        self._re.closing.set()
        await self._inner.aclose()

    def __aiter__(self) -> AsyncIterator[AudioFrame]:
        return self

    async def __anext__(self) -> AudioFrame:
        while True:
            if self._failed is not None:
                raise self._failed
            if self._closed:
                raise StopAsyncIteration
            inner = self._inner
            watch = self.stall_timeout_s if self._running else None
            try:
                if watch is None:
                    return await inner.__anext__()
                async with asyncio.timeout(watch):  # a timer handle, not a task per frame
                    return await inner.__anext__()
            except StopAsyncIteration:
                if self._closed:
                    raise
                cause = AudioDeviceError("device-lost", f"{self._re.name} stream ended unexpectedly")
            except TimeoutError:
                if not self._running or self._closed or inner is not self._inner:
                    continue  # stopped or replaced meanwhile: the silence was expected
                cause = AudioDeviceError("device-stalled", f"no audio from {self._re.name} for {watch:.1f} s")
            except self._re.retry_on as exc:
                if self._closed:
                    raise StopAsyncIteration from None
                cause = _as_device_error(exc)
            await self._recover(cause)

    async def _recover(self, cause: AudioDeviceError) -> None:
        old = self._inner
        self._retired_overflows += old.overflows
        self._recovering = True
        self._down_since = time.monotonic()
        try:
            await _close_quietly(old)

            async def open_(candidate: AudioSource) -> None:
                await candidate.start()  # proves the device is back, even while stopped
                if not self._running:  # stopped meanwhile (push-to-talk released): keep it open but quiet
                    await candidate.stop()

            try:
                fresh = await self._re.reopen(cause, self._factory, open_, _close_quietly)
            except AudioDeviceError as exc:
                self._failed = exc
                raise
            if fresh is not None:
                self._inner = fresh
                self._down_since = None
                _relax(fresh, self._relaxed)
                if self._running:  # start() may have come while the replacement was being opened
                    await fresh.start()
        finally:
            self._recovering = False


class ReopeningSink:
    """An AudioSink that survives its device going away: a speaker adapter from `factory`, re-built on loss.

    A loss shows up as one of `retry_on` from `play`/`drain`/`flush`; the wrapper re-opens (at most `max_attempts`
    tries, then AudioDeviceError) and carries on: `play` queues its chunk on the new device, `drain`/`flush` return
    (what was queued died with the device). It is reusable: `start()` after `aclose()` builds a fresh adapter, which
    is what a voice loop that opens the speaker per session needs (the sounddevice sink itself cannot restart).
    A speaker that cannot be opened at `start()` is retried the same way.
    """

    def __init__(
        self,
        factory: Callable[[], AudioSink],
        *,
        name: str = "speaker",
        initial_backoff_s: float = 0.2,
        max_backoff_s: float = 2.0,
        max_attempts: int | None = 10,
        retry_on: tuple[type[BaseException], ...] = (AudioDeviceError,),
        on_event: Callable[[RecoveryEvent], None] | None = None,
    ) -> None:
        self._factory = factory
        self._inner: AudioSink | None = None
        self._last: AudioSink = factory()  # for sample_rate_hz before the first start
        self._re = _Reopener(name, initial_backoff_s, max_backoff_s, max_attempts, retry_on, on_event)
        self._lock = asyncio.Lock()  # one recovery at a time (play and drain may fail together)

    @property
    def sample_rate_hz(self) -> int:
        """The current device stream's rate (known after start)."""
        return (self._inner or self._last).sample_rate_hz

    @property
    def inner(self) -> AudioSink | None:
        """The adapter currently in use (None while closed)."""
        return self._inner

    @property
    def recoveries(self) -> int:
        """How many times the device was re-opened."""
        return self._re.recoveries

    async def start(self) -> None:
        """Open the output device (a fresh adapter after `aclose()`); an absent device is retried with backoff."""
        if self._inner is not None:
            return
        self._re.closing = asyncio.Event()
        candidate: AudioSink | None
        candidate = self._factory()
        try:
            await candidate.start()
        except self._re.retry_on as exc:
            await _close_quietly(candidate)
            candidate = await self._re.reopen(_as_device_error(exc), self._factory, lambda c: c.start(),
                                              _close_quietly)
            if candidate is None:
                raise AudioDeviceError("device-closed", f"{self._re.name} was closed while opening") from exc
        self._inner = self._last = candidate

    def _current(self) -> AudioSink:
        if self._inner is None:
            raise RuntimeError("sink is not started (or already closed)")
        return self._inner

    async def _recover(self, failed: AudioSink, exc: BaseException) -> AudioSink:
        async with self._lock:
            if self._inner is not failed:  # another call already recovered (or the sink was closed)
                return self._current()
            await _close_quietly(failed)
            fresh = await self._re.reopen(_as_device_error(exc), self._factory, lambda c: c.start(), _close_quietly)
            if fresh is None or self._inner is not failed:
                if fresh is not None:
                    await _close_quietly(fresh)
                return self._current()
            self._inner = self._last = fresh
            return fresh

    async def play(self, pcm: bytes, sample_rate_hz: int, answer_id: str = "") -> None:
        """Queue PCM; after a loss the chunk is queued on the re-opened device."""
        sink = self._current()
        try:
            await sink.play(pcm, sample_rate_hz, answer_id)
        except self._re.retry_on as exc:
            sink = await self._recover(sink, exc)
            await sink.play(pcm, sample_rate_hz, answer_id)

    def first_sample(self, answer_id: str) -> asyncio.Future[float | None]:
        """First-sample time of `answer_id`; resolved None at once if the device is lost (recovery follows on play)."""
        try:
            return self._current().first_sample(answer_id)
        except self._re.retry_on:
            fut: asyncio.Future[float | None] = asyncio.get_running_loop().create_future()
            fut.set_result(None)
            return fut

    async def flush(self) -> None:
        """Drop queued audio (a lost device has nothing queued left: it is re-opened instead)."""
        sink = self._current()
        try:
            await sink.flush()
        except self._re.retry_on as exc:
            await self._recover(sink, exc)

    async def drain(self) -> None:
        """Wait for queued audio to play out; if the device was lost meanwhile, re-open it and return."""
        sink = self._current()
        try:
            await sink.drain()
        except self._re.retry_on as exc:
            await self._recover(sink, exc)

    async def aclose(self) -> None:
        """Release the device (cutting a recovery short); `start()` may open it again. Idempotent."""
        self._re.closing.set()
        sink, self._inner = self._inner, None
        if sink is not None:
            await sink.aclose()
