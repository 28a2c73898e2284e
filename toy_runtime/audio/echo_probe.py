"""Measure the echo path the canceller will face: play a short probe through the speaker (with the reference fed),
capture the mic, and compare what came back with the render frames the front end handed the canceller.

`doctor` uses it to check the reference alignment on the real device: the echo must arrive after its reference
(AEC3 cannot cancel an echo that comes before the render it belongs to) and within the canceller's reach.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ..ports.echo import EchoCanceller

__all__ = ["EchoPath", "RecordingCanceller", "echo_delay_ms", "measure_echo_path", "probe_pcm"]

REACH_MS = 250.0  # echoes up to this long after their reference are in AEC3's reach with room to spare


class RecordingCanceller:
    """A canceller that keeps every frame it was given and what it returned (benches and the probe)."""

    def __init__(self, canceller: EchoCanceller) -> None:
        self.canceller = canceller
        self.sample_rate_hz = canceller.sample_rate_hz
        self.cancels_echo = canceller.cancels_echo
        self.suppresses_noise = canceller.suppresses_noise
        self.delay_samples = canceller.delay_samples
        self.captures: list[bytes] = []
        self.renders: list[bytes] = []
        self.outputs: list[bytes] = []

    def process(self, capture: bytes, render: bytes) -> bytes:
        """The wrapped canceller's answer; all three frames kept."""
        self.captures.append(capture)
        self.renders.append(render)
        out = self.canceller.process(capture, render)
        self.outputs.append(out)
        return out

    def describe(self) -> str:
        """The wrapped canceller's line."""
        return self.canceller.describe()


@dataclass(frozen=True)
class EchoPath:
    """What came back: the delay after the aligned reference (ms; None: no echo found), its level relative to
    the reference (dB) and the echo removed by the canceller over the probe (dB)."""

    delay_ms: float | None
    gain_db: float | None
    erle_db: float | None

    @property
    def in_reach(self) -> bool:
        """The echo comes after its reference and soon enough for the canceller."""
        return self.delay_ms is not None and -2.0 <= self.delay_ms <= REACH_MS


def probe_pcm(sample_rate_hz: int = 16000, *, seconds: float = 0.8, level_dbfs: float = -24.0) -> bytes:
    """Soft noise bursts (speech-like on and off, 100 ms each): easy to find by correlation, not unpleasant."""
    rng = np.random.default_rng(5)
    n = int(seconds * sample_rate_hz)
    gate = np.repeat(np.tile([1.0, 0.0, 1.0, 1.0, 0.0], 20), sample_rate_hz // 10)[:n]
    x = rng.normal(0, 1, n) * np.pad(gate, (0, max(0, n - len(gate))))
    return (x * 32768 * 10 ** (level_dbfs / 20)).clip(-32768, 32767).astype(np.int16).tobytes()


def echo_delay_ms(raw: np.ndarray, ref: np.ndarray, sample_rate_hz: int = 16000, *,
                  max_ms: float = 500.0) -> tuple[float | None, float | None]:
    """(delay of `raw` behind `ref` in ms, the echo's gain in dB) by cross-correlation; (None, None) when no clear
    peak (nothing came back)."""
    n = min(len(raw), len(ref))
    a, b = raw[:n].astype(np.float64), ref[:n].astype(np.float64)
    if n == 0 or not b.any() or not a.any():
        return None, None
    size = 1 << int(np.ceil(np.log2(2 * n)))
    corr = np.fft.irfft(np.fft.rfft(a, size) * np.conj(np.fft.rfft(b, size)), size)
    reach = int(max_ms * sample_rate_hz / 1000)
    lags = np.concatenate([np.arange(0, reach), np.arange(-reach, 0)])
    values = np.concatenate([corr[:reach], corr[-reach:]])
    best = int(np.argmax(np.abs(values)))
    peak = abs(values[best]) / (np.sqrt(np.dot(a, a) * np.dot(b, b)) + 1e-9)
    if peak < 0.1:  # no echo of the probe in the capture
        return None, None
    lag = int(lags[best])
    shifted = b[: n - lag] if lag >= 0 else b[-lag:]
    echo = a[lag:] if lag >= 0 else a[: n + lag]
    gain = float(np.dot(echo, shifted) / (np.dot(shifted, shifted) + 1e-9))
    return lag * 1000.0 / sample_rate_hz, 20 * float(np.log10(abs(gain) + 1e-9))


async def measure_echo_path(mic: Any, sink: Any, reference: Any, canceller: EchoCanceller) -> EchoPath:
    """Play the probe on `sink` (opened with `reference`), capture `mic` through the front end, measure."""
    from .echo_stage import EchoCancelledSource

    recorder = RecordingCanceller(canceller)
    stage = EchoCancelledSource(mic, recorder, reference)
    probe = probe_pcm(16000)
    await mic.start()
    await sink.start()
    try:
        async def capture(seconds: float) -> None:
            loop = asyncio.get_running_loop()
            end = loop.time() + seconds
            async for _frame in stage:  # the recorder keeps every side of each frame
                if loop.time() >= end:
                    return

        task = asyncio.create_task(capture(len(probe) / 32000 + 0.9), name="echo-probe:capture")
        await asyncio.sleep(0.3)
        await sink.play(probe, 16000, "echo-probe")
        await asyncio.wait_for(task, timeout=10)
    finally:
        await sink.aclose()
        await mic.stop()
    mic_pcm = np.frombuffer(b"".join(recorder.captures), np.int16)
    ref = np.frombuffer(b"".join(recorder.renders), np.int16)
    out = np.frombuffer(b"".join(recorder.outputs), np.int16)
    delay, gain = echo_delay_ms(mic_pcm, ref)
    erle = None
    if delay is not None:
        loud = np.abs(ref.astype(np.float64)) > 100
        if loud.any():
            n = min(len(mic_pcm), len(out), len(loud))
            e_in = np.mean(mic_pcm[:n][loud[:n]].astype(np.float64) ** 2)
            e_out = cast(np.float64, np.mean(out[:n][loud[:n]].astype(np.float64) ** 2))
            erle = round(10 * float(np.log10(e_in / max(e_out, 1e-3))), 1)
    return EchoPath(None if delay is None else round(delay, 1), None if gain is None else round(gain, 1), erle)
