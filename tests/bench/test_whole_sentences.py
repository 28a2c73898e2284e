"""The pause corpus voiced whole and cut where the child pauses: the cut falls between two words, and the part
before it keeps the melody of a sentence that goes on (it is not lengthened as a sentence's end is)."""

from __future__ import annotations

import pytest

from toy_runtime.bench.utterances import audible_phrase
from toy_runtime.bench.whole_sentences import english_cuts, mandarin_cuts, whole_sentence_parts


def test_an_english_cut_falls_in_the_middle_of_the_gap_after_the_parts_last_word():
    # "can we | play": phonemes of 100 samples, word gaps of 40
    alignments = [("^", 100), ("k", 100), (" ", 40), ("w", 100), (" ", 40), ("p", 100), ("$", 100)]
    assert english_cuts(alignments, [2, 1]) == [200 + 40 + 100 + 20]
    assert english_cuts(alignments, [1, 1, 1]) == [220, 360]
    with pytest.raises(ValueError, match="2 word gaps for 4 words"):
        english_cuts(alignments, [2, 2])


def test_a_mandarin_cut_falls_in_the_middle_of_the_mark_after_the_prefixs_last_character():
    # 大象 | 喜欢: initial, final, mark per character; the sentence closes on silence (1) and its end (2)
    ids = [1, 10, 11, 9, 12, 13, 9, 14, 15, 9, 16, 17, 1, 2]
    samples = [100] * len(ids)
    prefix = [1, 10, 11, 9, 12, 13, 1, 2]  # 大象 voiced alone
    assert mandarin_cuts(ids, samples, [prefix]) == [650]  # the mark after 象 spans 600-700
    with pytest.raises(ValueError, match="not voiced the same"):
        mandarin_cuts(ids, samples, [[1, 10, 99, 1, 2]])


@pytest.mark.parametrize("parts", [("how many legs", "does a spider have"), ("我最喜欢的动物", "是长颈鹿")])
def test_a_prefix_voiced_inside_its_sentence_is_shorter_than_voiced_alone(parts, tmp_path, voice, zh_voice):
    """A sentence's end is lengthened; the same words mid-sentence are not: the cut part is the one that goes on."""
    cut = whole_sentence_parts(parts, tmp_path)
    alone = [audible_phrase(p, tmp_path) for p in parts]
    assert len(cut) == 2 and all(len(c) > 16000 * 0.25 for c in cut)
    assert len(cut[0]) < 0.9 * len(alone[0])
    assert abs(len(cut[1]) - len(alone[1])) < 0.15 * len(alone[1])  # the last part ends the sentence either way
    assert whole_sentence_parts(parts, tmp_path)[0].tobytes() == cut[0].tobytes()  # cached, deterministic
