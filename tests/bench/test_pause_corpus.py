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
    assert "| fixed 300 ms | 1/1 (100%) | 0/1 (0%) | 1/2 (50%) | 305 / 305 ms |" in table


def test_a_predicted_end_waits_on_an_unfinished_transcript_and_ends_a_finished_one_early():
    """Each silence judged as the listener does: 40 ms into it, the transcript so far sets the wait."""
    from toy_runtime.audio.turn_end import TurnEndPolicy

    policy = TurnEndPolicy(complete_ms=120, hangover_ms=300, unfinished_ms=1200)
    parts = [burst(500), burst(400)]
    heard: list[int] = []

    def hear(text_by_length):
        def _hear(pcm: bytes) -> str:
            heard.append(len(pcm))
            return text_by_length(len(pcm))
        return _hear

    # the first part reads "I want": the 900 ms pause is waited out; the whole reads finished: ends 120 ms after
    cut, delay = judge_utterance(parts, [900], 300, vad_factory=LoudIsSpeech, turn_end=policy,
                                 hear=hear(lambda n: "I want" if n < 16000 * 2 * 1.5 else "I want a story."))
    assert not cut and 100 <= delay <= 160 and len(heard) == 2
    # the first part reads finished: the turn ends in the pause (a cut), as a fixed 300 ms hangover would too
    cut, _ = judge_utterance(parts, [900], 300, vad_factory=LoudIsSpeech, turn_end=policy,
                             hear=lambda pcm: "Tell me a story.")
    assert cut
