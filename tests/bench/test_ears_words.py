"""`bench ears`' words-right score: compared as words (not as written), each clip heard at every alignment."""

from __future__ import annotations

import numpy as np

from toy_runtime.bench.ears import ChildClip, EarsResult, _recognition, word_accuracy


def test_punctuation_and_capitals_are_not_errors():
    assert word_accuracy("Turn the volume down.", "turn the volume down") == 1.0
    assert word_accuracy("What's your name?", "what's your name") == 1.0
    assert word_accuracy("Turn the volume.", "turn the volume down") == 0.75
    assert word_accuracy("", "turn it down") == 0.0


class ShiftEcho:
    """A recognizer that reports how much audio it was fed: which alignment it heard."""

    def __init__(self):
        self.fed = 0
        self.lengths: list[int] = []

    def start_utterance(self):
        self.fed = 0

    def accept(self, pcm):
        self.fed += len(pcm)

    def finish(self):
        self.lengths.append(self.fed)
        return "turn it down" if len(self.lengths) % 2 else "turn it"


def test_each_clip_is_heard_at_every_alignment_and_pooled():
    rate = 16000
    clip = ChildClip("turn it down", "en-us", bytes(2 * rate), over_answer=True, start_s=1.0)
    quiet = ChildClip("turn it down", "en-us", bytes(2 * rate), over_answer=False, start_s=4.0)
    silence = np.zeros(8 * rate, np.int16)
    result = EarsResult(raw=silence, clean=silence, ref=silence, cancelled=silence, clips=[clip, quiet],
                        first_answer_s=None, cpu_s=0.0, audio_s=8.0)
    recognizer = ShiftEcho()
    words = _recognition(result, recognizer, shifts=(0, 40, 80, 120))
    # four hearings per clip, each starting 40 samples earlier (2 bytes a sample)
    assert np.diff(recognizer.lengths[:4]).tolist() == [80, 80, 80]
    assert len(recognizer.lengths) == 8
    # half the hearings got every word, half two of three: pooled, not the first alone
    assert words["words_right_over_answer_pct"] == round(100 * (1 + 2 / 3) / 2, 1)
    assert words["heard"][0]["heard"] == ["turn it down", "turn it", "turn it down", "turn it"]
