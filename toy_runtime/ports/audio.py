"""Audio ports: the microphone (AudioSource), the speaker (AudioSink) and voice activity detection.

All PCM on these ports is signed 16-bit little-endian mono. Times are `time.monotonic()` seconds unless a
docstring says otherwise.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import AsyncIterator, Protocol, runtime_checkable

from ..errors import ToyError

__all__ = ["AudioFrame", "AudioSource", "AudioSink", "VoiceActivityDetector", "AudioDeviceError"]


class AudioDeviceError(ToyError):
    """An audio device that cannot be opened or failed while running. `code` is stable, e.g. "device-not-found"."""

    code = "audio_device_failed"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class AudioFrame:
    """A short block of captured audio (10, 20 or 30 ms) with the time its first sample was captured."""

    pcm: bytes
    sample_rate_hz: int
    timestamp_s: float
    # The same moment for the recognizer, when it should hear it differently (the front end: echo-cancelled but
    # not noise-suppressed; noise suppression helps the VAD and costs Whisper 1-3 points). None: `pcm`.
    asr_pcm: bytes | None = None
    # The index of its first sample in the capture stream, counting the audio lost on the way (a device overflow,
    # a frame our queue dropped): consecutive frames step by their length, a longer step is audio that never
    # arrived. The echo canceller's reference follows it exactly. None: not known (files, fakes).
    first_sample: int | None = None
    # While the toy talks (set by the echo stage): the level, in dBFS of `pcm`, a frame must reach to count as speech
    # (the room's usual level plus a margin: audio/room_level.py). None: whatever the VAD says.
    speech_floor_db: float | None = None

    @property
    def for_recognizer(self) -> bytes:
        """What the speech recognizer gets: `asr_pcm` if set, else `pcm`."""
        return self.pcm if self.asr_pcm is None else self.asr_pcm

    @property
    def samples(self) -> int:
        """Number of samples in the frame."""
        return len(self.pcm) // 2

    @property
    def duration_ms(self) -> float:
        """Frame length in milliseconds."""
        return self.samples * 1000.0 / self.sample_rate_hz

    @property
    def end_s(self) -> float:
        """Capture time just after the last sample."""
        return self.timestamp_s + self.samples / self.sample_rate_hz


@runtime_checkable
class AudioSource(Protocol):
    """A microphone: an async iterator of fixed-size frames.

    Iteration ends (StopAsyncIteration) after `aclose()` or, for finite sources, at the end of the audio.
    Frames dropped because the consumer fell behind are counted in `overflows` (the source never blocks its
    producer thread).
    """

    sample_rate_hz: int
    frame_ms: int

    @property
    def overflows(self) -> int:
        """Frames dropped because the bounded queue to the consumer was full."""
        ...

    async def start(self) -> None:
        """Open the device (if needed) and start delivering frames."""
        ...

    async def stop(self) -> None:
        """Stop delivering frames but keep the device; `start()` resumes."""
        ...

    async def aclose(self) -> None:
        """Release the device and end iteration. Idempotent."""
        ...

    def __aiter__(self) -> AsyncIterator[AudioFrame]: ...

    async def __anext__(self) -> AudioFrame: ...


@runtime_checkable
class RelaxableSource(Protocol):
    """A microphone that can hand its frames over in groups while nobody needs each one at once (optional).

    A listener waiting for speech calls `relax_delivery(True)`: frames may then come ~100 ms at a time (one
    event-loop wake-up per group instead of one per device callback; idle listening's loop work is mostly those
    wake-ups). From speech on it calls `relax_delivery(False)`: every frame as soon as it is captured. Frames and
    their timestamps are the same either way."""

    def relax_delivery(self, relaxed: bool) -> None:
        """Group frames (True) or hand each over at once (False, the default); takes effect at the next capture."""
        ...


@runtime_checkable
class AudioSink(Protocol):
    """A speaker with a bounded play queue, interruptible, that reports when each answer starts sounding.

    Chunks are tagged with an `answer_id` (unique per answer); `first_sample(answer_id)` resolves with the
    monotonic time at which the first sample of that answer was written to the device, or None if the answer was
    flushed or the sink closed before it started.
    """

    sample_rate_hz: int

    async def start(self) -> None:
        """Open the output device."""
        ...

    async def play(self, pcm: bytes, sample_rate_hz: int, answer_id: str = "") -> None:
        """Queue PCM (resampled to the device rate if needed); waits while the bounded queue is full."""
        ...

    def first_sample(self, answer_id: str) -> asyncio.Future[float | None]:
        """Future for the time the first sample of `answer_id` was written (None if flushed before playing)."""
        ...

    async def flush(self) -> None:
        """Interrupt: drop all queued audio; returns once the device has received its last block of it."""
        ...

    async def drain(self) -> None:
        """Wait until everything queued so far has been played out (plus the short tail pad)."""
        ...

    async def aclose(self) -> None:
        """Stop and release the device. Queued audio is dropped. Idempotent."""
        ...


@runtime_checkable
class VoiceActivityDetector(Protocol):
    """Per-frame speech/non-speech decision. Cheap enough to run on every captured frame in the event loop."""

    def is_speech(self, frame: AudioFrame) -> bool: ...
