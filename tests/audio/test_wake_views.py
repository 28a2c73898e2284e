"""The wake word heard at a lower pitch too (audio/wake_views.py), over scripted detectors: each view gets the audio
resampled by its factor, either detector wakes the toy, one phrase heard by both wakes it once, and a reset
clears every view. (The real model through it keeps the whole wake-word contract: tests/audio/test_wake_word.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from toy_runtime.audio.wake_views import PitchViews
from toy_runtime.fakes.wake import NeverWakes, ScriptedWakeWord

RATE = 16000
FRAME = 320


def feed(detector: PitchViews, seconds: float) -> list[int]:
    """Feed `seconds` of a tone in 20 ms frames; the input sample at the end of each frame that woke it."""
    tone = (3000 * np.sin(np.arange(int(seconds * RATE)) * 0.3)).astype(np.int16).tobytes()
    step = 2 * FRAME
    return [(i + step) // 2 for i in range(0, len(tone), step) if detector.process(tone[i : i + step])]


def test_a_view_hears_the_audio_stretched_by_its_factor():
    primary, view = ScriptedWakeWord(), ScriptedWakeWord()
    feed(PitchViews(primary, [(1.15, view)]), 2.0)
    assert primary.fed == 2 * RATE
    assert abs(view.fed - 2 * RATE * 1.15) < 64  # all of it, less the resampler's look-ahead


def test_either_detector_wakes_the_toy():
    assert feed(PitchViews(ScriptedWakeWord([RATE]), [(1.15, NeverWakes())]), 3.0) == [RATE]
    woke = feed(PitchViews(NeverWakes(), [(1.15, ScriptedWakeWord([round(1.15 * RATE)]))]), 3.0)
    assert len(woke) == 1 and abs(woke[0] - RATE) <= FRAME + 64  # the view's phrase ends as the real one does


def test_one_phrase_heard_by_both_wakes_it_once():
    both = PitchViews(ScriptedWakeWord([RATE, 3 * RATE]), [(1.15, ScriptedWakeWord([round(1.2 * 1.15 * RATE)]))])
    assert feed(both, 4.0) == [RATE, 3 * RATE]  # the view's detection 0.2 s later is the same phrase
    assert both.fired_by == [2, 0]


def test_a_reset_clears_every_view():
    primary, view = ScriptedWakeWord(), ScriptedWakeWord()
    views = PitchViews(primary, [(1.15, view)])
    feed(views, 0.5)
    views.reset()
    assert (primary.resets, view.resets) == (1, 1)
    before = view.fed
    feed(views, 1.0)
    assert abs(view.fed - before - 1.15 * RATE) < 64  # a fresh resampler: no history carried over


def test_a_factor_out_of_range_is_refused():
    with pytest.raises(ValueError, match="factor"):
        PitchViews(NeverWakes(), [(3.0, NeverWakes())])
