"""WebRTC's audio processing module (AEC3 echo cancellation, noise suppression, high-pass, gain control) through
the LiveKit SDK's bindings (`livekit`, Apache-2.0, wheels for x86_64 and aarch64 Linux: nothing to build on a Pi).

Chosen by measurement on a synthetic echo path (docs/benchmarks.md "Ears"): 34-37 dB of echo removed from the first
two seconds at 60 and 120 ms delay with no delay hint, ~0.6 % of a core for both streams, +35 MB resident. The
alternatives measured for the issue: `aec-audio-processing` (the same AEC3, but source-only: a 7-minute g++ build
and no aarch64 wheel), Debian's speexdsp (31-43 % of echo frames still looked like speech) and PulseAudio's
echo-cancel module (needs an exact delay hint).

The module runs in the SDK's native library; each call is one blocking FFI request that releases the GIL, ~30 µs.

Its output comes a few milliseconds after its input (AEC3 works in 4 ms blocks: 8 ms at 16 kHz; the noise suppressor
overlaps its windows: 6 ms). That delay is measured once per configuration, on a throwaway instance fed noise, and
declared as `delay_samples`: measured, it stays true whatever the library version or the rate.
"""

from __future__ import annotations

import logging
import threading

__all__ = ["WebRtcAudioProcessor"]

log = logging.getLogger(__name__)

_DELAYS: dict[tuple[int, bool, bool, bool, bool], int] = {}  # per configuration: its measured delay in samples
_DELAYS_LOCK = threading.Lock()


class WebRtcAudioProcessor:
    """An `EchoCanceller` on WebRTC's APM: every `process()` feeds the render frame, then cleans the capture frame.

    Render first: AEC3 needs the far end before the near end that contains its echo. The filter and its delay
    estimate live as long as this object, so one instance serves the whole process (converged across answers).
    """

    def __init__(self, sample_rate_hz: int = 16000, *, echo_cancellation: bool = True,
                 noise_suppression: bool = True, high_pass_filter: bool = True, auto_gain: bool = False) -> None:
        from livekit import rtc  # ~0.1 s and a native runtime: only when the front end is on

        from ..service.process_exit import skip_finalization

        skip_finalization("livekit's FFI runtime calls into Python from its own threads")
        if sample_rate_hz % 100:
            raise ValueError(f"sample rate {sample_rate_hz} Hz has no whole 10 ms frame")
        self._rtc = rtc
        self.sample_rate_hz = sample_rate_hz
        self.cancels_echo = echo_cancellation
        self.suppresses_noise = noise_suppression
        self.auto_gain = auto_gain
        self._samples = sample_rate_hz // 100
        self._flags = dict(echo_cancellation=echo_cancellation, noise_suppression=noise_suppression,
                           high_pass_filter=high_pass_filter, auto_gain_control=auto_gain)
        self._apm = rtc.AudioProcessingModule(**self._flags)
        key = (sample_rate_hz, echo_cancellation, noise_suppression, high_pass_filter, auto_gain)
        with _DELAYS_LOCK:
            if key not in _DELAYS:
                _DELAYS[key] = self._measure_delay()
        self.delay_samples: int = _DELAYS[key]

    def process(self, capture: bytes, render: bytes) -> bytes:
        """Feed `render` (what the speaker played at this moment), return `capture` without its echo."""
        n = self._samples
        if len(capture) != 2 * n or len(render) != 2 * n:
            raise ValueError(f"frames must be 10 ms ({2 * n} bytes); got {len(capture)} and {len(render)}")
        rtc = self._rtc
        if self.cancels_echo:
            self._apm.process_reverse_stream(rtc.AudioFrame(bytearray(render), self.sample_rate_hz, 1, n))
        frame = rtc.AudioFrame(bytearray(capture), self.sample_rate_hz, 1, n)
        self._apm.process_stream(frame)  # in place
        return bytes(frame.data.cast("B"))

    def _measure_delay(self, seconds: float = 0.6, max_ms: float = 50.0) -> int:
        """Feed a throwaway module of this configuration 0.6 s of white noise (silence as the render) and find where
        its output matches its input best: the lag of the cross-correlation peak, in samples (~5 ms of CPU)."""
        import numpy as np

        rtc, n = self._rtc, self._samples
        apm = rtc.AudioProcessingModule(**self._flags)
        noise = np.random.default_rng(0).normal(0.0, 3000.0, int(seconds * self.sample_rate_hz) // n * n)
        pcm = noise.astype(np.int16)
        silence = bytearray(2 * n)
        out = []
        for i in range(0, len(pcm), n):
            if self.cancels_echo:
                apm.process_reverse_stream(rtc.AudioFrame(silence, self.sample_rate_hz, 1, n))
            frame = rtc.AudioFrame(bytearray(pcm[i : i + n].tobytes()), self.sample_rate_hz, 1, n)
            apm.process_stream(frame)
            out.append(np.frombuffer(bytes(frame.data.cast("B")), np.int16))
        heard = np.concatenate(out).astype(np.float64)
        lags = int(max_ms * self.sample_rate_hz / 1000)
        # the second half of the input against the output from each lag on: the filters have settled by then
        start = len(pcm) // 2
        span = len(pcm) - start - lags
        said = pcm[start : start + span].astype(np.float64)
        scores = [float(np.dot(heard[start + lag : start + lag + span], said)) for lag in range(lags)]
        return int(np.argmax(scores))

    def describe(self) -> str:
        """The stages that are on, in one line."""
        parts = ["echo cancellation: WebRTC AEC3" if self.cancels_echo else "echo cancellation: off",
                 f"noise suppression: {'on' if self.suppresses_noise else 'off'}"]
        if self.auto_gain:
            parts.append("gain control: on")
        return ", ".join(parts)
