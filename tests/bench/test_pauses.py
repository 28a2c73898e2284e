"""The pause bench's false-cut rule, on tones through the scripted energy VAD (deterministic, no piper)."""

from __future__ import annotations

import numpy as np

from toy_runtime.bench.pauses import PauseResult, false_cuts, markdown
from toy_runtime.fakes.audio import ScriptedVAD, tone


def part(ms: float) -> np.ndarray:
    return np.frombuffer(tone(ms), dtype="<i2")


def test_a_pause_longer_than_the_hangover_cuts_the_utterance_and_a_shorter_one_does_not():
    first, second = part(600), part(400)
    for level in (True, False):
        cut = lambda pause, hangover: false_cuts(first, second, pause, hangover, end_by_level=level,  # noqa: E731
                                                 vad_factory=ScriptedVAD)
        assert cut(300, 200) and cut(250, 200)
        assert not cut(150, 200) and not cut(300, 400)


def test_the_table_counts_cuts_per_hangover_and_rule():
    rows = [PauseResult("a … b", 150, 200, True, False), PauseResult("c … d", 300, 200, True, True),
            PauseResult("a … b", 150, 200, False, False), PauseResult("c … d", 300, 200, False, False)]
    table = markdown(rows)
    assert "| by level | 1/2 (from 300 ms) |" in table and "| VAD alone | 0/2 |" in table
