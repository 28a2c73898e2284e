"""Resampling accuracy, streaming = one-shot, anti-aliasing, and leading-silence trimming."""

from __future__ import annotations

import numpy as np
import pytest

from toy_runtime.audio.resample import Resampler, leading_silence_samples, resample, trim_leading_silence


def sine(freq: float, rate: int, seconds: float = 1.0, amp: float = 10000.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.int16)


@pytest.mark.parametrize("src,dst", [(48000, 16000), (22050, 16000), (16000, 22050), (22050, 48000), (44100, 16000)])
def test_tone_survives_and_length_matches(src, dst):
    out = np.frombuffer(resample(sine(1000, src), src, dst), dtype=np.int16)
    assert len(out) == dst  # one second in, one second out
    ref = sine(1000, dst).astype(float)
    err = np.abs(out[300:-300] - ref[300:-300]).max()
    assert err < 60  # < 0.6 % of the amplitude


@pytest.mark.parametrize("src,dst", [(48000, 16000), (22050, 16000)])
def test_streaming_in_odd_blocks_equals_one_shot(src, dst):
    x = sine(440, src, 0.5)
    r = Resampler(src, dst)
    block = src // 50 + 7
    parts = [r.process(x[i : i + block]) for i in range(0, len(x), block)] + [r.flush()]
    assert b"".join(parts) == resample(x, src, dst)


def test_downsampling_removes_content_above_the_new_nyquist():
    out = np.frombuffer(resample(sine(9500, 48000), 48000, 16000), dtype=np.int16).astype(float)
    rms = np.sqrt(np.mean(out[300:-300] ** 2))
    assert rms < 20  # the 9.5 kHz tone (amplitude 10000) would alias to 6.5 kHz without the low-pass


def test_same_rate_is_a_copy():
    x = sine(300, 16000, 0.1)
    assert resample(x, 16000, 16000) == x.tobytes()


def test_trim_leading_silence_keeps_a_small_margin():
    rate = 22050
    quiet = np.zeros(int(rate * 0.045), dtype=np.int16) + 20  # 45 ms of near-silence
    loud = sine(200, rate, 0.2)
    loud[0:3] = 0
    pcm = np.concatenate([quiet, loud]).tobytes()
    trimmed, ms = trim_leading_silence(pcm, rate, threshold=300, keep_ms=5)
    first_loud = leading_silence_samples(pcm, threshold=300, keep_ms=0, sample_rate_hz=rate)
    assert 39 < ms < 46
    assert (len(pcm) - len(trimmed)) // 2 == first_loud - round(0.005 * rate)


def test_all_silent_audio_is_not_trimmed():
    pcm = bytes(2000)
    assert trim_leading_silence(pcm, 16000) == (pcm, 0.0)
