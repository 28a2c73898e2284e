"""The pause corpus: an utterance is cut when a pause outlasts the hangover, and the corpus is big enough."""

from __future__ import annotations

import numpy as np

from toy_runtime.audio.level import level_db
from toy_runtime.bench.pause_corpus import COMPLETE, PAUSED, PAUSES_MS, CorpusResult, judge_utterance, markdown
from toy_runtime.language import has_cjk


class LoudIsSpeech:
    """A VAD that calls any frame above -40 dBFS speech (the parts below are tones, not voices)."""

    def is_speech(self, frame) -> bool:
        return level_db(frame.pcm) > -40


def burst(ms: int) -> np.ndarray:
    t = np.arange(16 * ms)
    return (np.sin(t / 3) * 8000).astype(np.int16)


def test_a_pause_longer_than_the_hangover_cuts_and_a_shorter_one_does_not():
    parts = [burst(500), burst(400)]
    cut, delay = judge_utterance(parts, [600], 300, vad_factory=LoudIsSpeech)
    assert cut and delay is None
    cut, delay = judge_utterance(parts, [600], 800, vad_factory=LoudIsSpeech)
    assert not cut and 780 <= delay <= 840  # the endpoint comes one hangover after the audible end


def test_a_complete_command_costs_one_hangover():
    cut, delay = judge_utterance([burst(700)], [], 300, vad_factory=LoudIsSpeech)
    assert not cut and 280 <= delay <= 340


def test_the_corpus_is_the_issues_size_and_bilingual():
    assert len(PAUSED) + len(COMPLETE) >= 60
    assert sum(has_cjk(p[0]) for p in PAUSED) >= 20 and sum(not has_cjk(p[0]) for p in PAUSED) >= 20
    assert min(PAUSES_MS) == 300 and max(PAUSES_MS) == 1200


def test_the_table_counts_cuts_per_language():
    rows = [CorpusResult("a … b", "en", "paused", (600,), 300, True, None),
            CorpusResult("c … d", "zh", "paused", (600,), 300, False, 310.0),
            CorpusResult("go", "en", "complete", (), 300, False, 305.0)]
    table = markdown(rows)
    assert "| 300 ms | 1/1 (100%) | 0/1 (0%) | 1/2 (50%) | 305 / 305 ms |" in table
