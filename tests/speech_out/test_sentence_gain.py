"""SentenceGain: piper's per-sentence level, decided slice by slice so a sentence can play before it is voiced."""

from __future__ import annotations

import numpy as np
import pytest

from toy_runtime.speech_out.sentence_gain import RAMP_SAMPLES, SentenceGain


def tone(peak: float, n: int = 2000) -> np.ndarray:
    return (peak * np.sin(np.arange(n) * 0.05)).astype(np.float32)


def test_a_sentence_under_the_reference_peak_keeps_one_gain_from_first_sample_to_last():
    gain = SentenceGain(0.5)
    parts = [gain.apply(tone(p)) for p in (0.2, 0.45, 0.3)]
    assert gain.gain == pytest.approx(2.0)
    for raw, out in zip((0.2, 0.45, 0.3), parts):
        assert float(np.abs(out).max()) == pytest.approx(raw * 2.0, rel=1e-3)


def test_a_louder_slice_lowers_the_gain_eased_in_and_never_over_full_scale():
    gain = SentenceGain(0.5)
    gain.apply(tone(0.4))
    loud = gain.apply(np.full(500, 0.8, np.float32))
    assert gain.gain == pytest.approx(1 / 0.8)  # as piper would scale the whole sentence: its peak at full scale
    assert float(np.abs(loud).max()) <= 1.0  # the first samples of the ramp, over full scale, are clipped
    gains = loud / 0.8  # the gain per sample: from 2.0 down to 1.25 in small steps over the ramp, then 1.25
    steps = np.diff(gains[:RAMP_SAMPLES])
    assert np.all(steps <= 1e-6) and np.abs(steps).max() < 0.02
    assert gains[RAMP_SAMPLES:] == pytest.approx(1.25)
    assert float(gains[RAMP_SAMPLES - 1]) == pytest.approx(1.25, abs=0.02)
    after = gain.apply(tone(0.3))
    assert gain.gain == pytest.approx(1 / 0.8, rel=1e-4)  # never rises again within the sentence
    assert float(np.abs(after).max()) == pytest.approx(0.3 / 0.8, rel=1e-3)


def test_volume_scales_the_level_and_an_empty_slice_is_nothing():
    gain = SentenceGain(0.5, volume=0.5)
    assert float(np.abs(gain.apply(tone(0.5))).max()) == pytest.approx(0.5, rel=1e-3)
    assert gain.apply(np.zeros(0, np.float32)).size == 0
    with pytest.raises(ValueError):
        SentenceGain(0.0)
