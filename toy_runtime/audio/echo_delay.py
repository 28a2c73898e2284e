"""Keeps the render where the canceller learnt it: the echo's delay behind the reference, watched and held.

The echo reference (audio/echo_reference.py) places what the speaker played by PortAudio's DAC times and sample
counts. After a speaker underrun the silence the device played is placed by a DAC time that is a few samples off;
a path that loses or repeats audio (an ALSA xrun recovery) moves too. Each such step moves the echo against its
reference by a fraction of a millisecond, and AEC3 — which learnt the old relation — leaks the toy's voice until it
has learnt the new one, and afterwards leaks more often (replayed on the echo rig: a run whose echo moved by −15,
+6, +15 and +5 samples had 13 of the toy's own speech starts get past the canceller, 10 of them in the 100 s after
the last three steps; docs/benchmarks.md, "Ears").

The monitor measures the delay itself, by cross-correlating what the mic heard with the render it was given, every
`every_ms` of audible render over a `window_ms` window. The first confident estimate is the relation to keep; a later
confident one that differs, and is measured the same twice running, is returned as a shift, and the stage
moves the reference back by it (`EchoReference.nudge`) within about half a second of the step. The shifts never
add up to more than `near_ms` away from the relation kept: a path that moved further is a new path, kept from then
on, not a step to undo (and a run of misjudged windows must not walk the reference away). A window with the child speaking over the toy, or a
room too loud, correlates poorly and is skipped (`min_score`). Only the lags near the kept one are searched after
the first estimate (`near_ms`), so each check is three small FFTs (~1 ms here, four times a second while the toy
talks; nothing while it is silent).
"""

from __future__ import annotations

from collections import deque

import numpy as np

__all__ = ["EchoDelayMonitor"]


class EchoDelayMonitor:
    """Feed it every 10 ms piece (mic before the canceller, render given with it); `add()` returns a shift in
    samples (the echo now comes that much later than the relation first measured) when it has found one, else 0."""

    def __init__(self, sample_rate_hz: int = 16000, *, window_ms: float = 250.0, every_ms: float = 250.0,
                 max_delay_ms: float = 400.0, near_ms: float = 30.0, min_score: float = 0.9,
                 audible_rms: float = 300.0) -> None:
        self.sample_rate_hz = sample_rate_hz
        self._piece = sample_rate_hz // 100
        self._window = int(window_ms * sample_rate_hz / 1000)
        self._every = max(1, int(every_ms / 10))
        self._max_lag = int(max_delay_ms * sample_rate_hz / 1000)
        self._near = int(near_ms * sample_rate_hz / 1000)
        self._min_score = min_score
        self._audible_ms = audible_rms**2  # mean square of the render window: the toy talking, not a faint tail
        keep = (self._window + self._max_lag) // self._piece + 2
        self._mic: deque[bytes] = deque(maxlen=keep)
        self._render: deque[bytes] = deque(maxlen=keep)
        self._since = 0
        self._pending: int | None = None  # a differing lag seen once: returned when the next check agrees
        self._moved = 0  # the shifts returned so far, summed: kept within near_ms
        self.delay_samples: int | None = None  # the relation kept: the echo's delay behind the render
        self.last_score = 0.0
        self.checks = 0  # estimates made
        self.shifts = 0  # shifts found and returned

    def add(self, mic: bytes, render: bytes) -> int:
        """One 10 ms piece. Returns the shift to undo (samples; 0 = none)."""
        self._mic.append(mic)
        self._render.append(render)
        self._since += 1
        if self._since < self._every:
            return 0
        self._since = 0
        lag = self._estimate()
        if lag is None:
            return 0
        if self.delay_samples is None:
            self.delay_samples = lag
            return 0
        shift = lag - self.delay_samples
        if not shift or shift != self._pending:
            self._pending = shift or None
            return 0
        self._pending = None
        if abs(self._moved + shift) > self._near:
            # the path itself moved further (another device, a restarted stream): the canceller learns it anew,
            # and this is the relation to keep from now on
            self.delay_samples, self._moved = lag, 0
            return 0
        self._moved += shift
        self.shifts += 1
        # what is buffered was read with the old relation: measure afresh after the reference moved
        self._mic.clear()
        self._render.clear()
        return shift

    def forget(self) -> None:
        """A new echo path (another device): the next confident estimate is the relation to keep."""
        self.delay_samples = self._pending = None
        self._moved = 0
        self._mic.clear()
        self._render.clear()

    def _estimate(self) -> int | None:
        lo, hi = (0, self._max_lag) if self.delay_samples is None else (
            max(self.delay_samples - self._near, 0), self.delay_samples + self._near)
        n = self._window
        need = (n + hi) // self._piece + 1
        if len(self._mic) < need:
            return None
        render = np.frombuffer(b"".join(list(self._render)[-need:]), np.int16).astype(np.float64)
        if float(np.mean(render[-n:] ** 2)) < self._audible_ms:
            return None
        heard = np.frombuffer(b"".join(list(self._mic)[-need:]), np.int16).astype(np.float64)[-n:]
        # the render from `hi` samples before the window to `lo` before its end: heard[t] ~ render[t - lag]
        segment = render[len(render) - n - hi : len(render) - lo]
        size = 1 << int(np.ceil(np.log2(len(segment) + n)))
        corr = np.fft.irfft(np.fft.rfft(segment, size) * np.conj(np.fft.rfft(heard, size)), size)[: hi - lo + 1]
        energy = np.convolve(segment**2, np.ones(n), mode="valid")[: hi - lo + 1]
        if float(energy.min()) < n * self._audible_ms / 16:
            # a candidate render slice (nearly) silent — the answer starting or ending: the true slice may be the
            # quiet one, and a louder neighbour a pitch period away scored higher (0.92 at −152 samples on the rig)
            return None
        scores = corr / (np.sqrt(energy * np.dot(heard, heard)) + 1e-9)
        best = int(np.argmax(scores))
        self.checks += 1
        self.last_score = float(scores[best])
        if self.last_score < self._min_score:
            return None  # double talk, a loud room, or no echo at all: no estimate
        return hi - best
