"""The pause session of `bench voice`: which utterances it plays, and when a child counts as cut off."""

from __future__ import annotations

import numpy as np
import pytest

from toy_runtime.bench import voice_pauses
from toy_runtime.bench.heard import HeardTurn, levels_of
from toy_runtime.bench.voice_pauses import PausePlay, class_summary, pause_plays, was_cut
from toy_runtime.language import has_cjk


def test_the_session_plays_every_utterance_of_one_language_two_paused_to_one_complete(monkeypatch, tmp_path):
    from toy_runtime.bench import utterances

    monkeypatch.setattr(utterances, "audible_phrase", lambda text, cache: np.full(1600, 1000, np.int16))
    plays = pause_plays("en", tmp_path)
    assert [p.kind for p in plays[:6]] == ["paused", "paused", "complete"] * 2
    assert sum(p.kind == "paused" for p in plays) == 20 and sum(p.kind == "complete" for p in plays) == 10
    first = plays[0]  # "I want … um … a story about a dragon": three parts of 100 ms, pauses of 300 and 450 ms
    assert first.text.startswith("I want") and len(first.pcm) == 2 * (3 * 1600 + 4800 + 7200)
    assert first.last_start_s == pytest.approx(0.1 + 0.3 + 0.1 + 0.45)
    assert not any(has_cjk(p.text) for p in plays)
    assert all(p.last_start_s == 0 for p in plays if p.kind == "complete")


def _speaker(sounding: tuple[float, float] | None, seconds: float = 4.0):
    x = np.zeros(int(16000 * seconds), np.int16)
    if sounding:
        x[int(16000 * sounding[0]):int(16000 * sounding[1])] = 8000
    return levels_of(x, 16000)


def test_a_child_is_cut_off_by_an_answer_in_her_pause_a_second_turn_or_an_end_of_speech_in_it():
    heard = HeardTurn(speech_start_s=1.0, speech_end_s=3.0, reply_onset_s=3.3)
    ok = dict(turns_ended=1, runtime_early_ms=10.0)
    assert not was_cut(heard, _speaker((3.3, 3.9)), 0.9, -50.0, **ok)  # answered after she finished
    assert was_cut(heard, _speaker((2.0, 2.5)), 0.9, -50.0, **ok)  # the toy spoke in her pause
    assert was_cut(heard, _speaker((3.3, 3.9)), 0.9, -50.0, turns_ended=2, runtime_early_ms=10.0)
    # the runtime's end of speech 0.9 s before her last sound: it ended the turn in the pause, whatever it said after
    assert was_cut(heard, _speaker((3.3, 3.9)), 0.9, -50.0, turns_ended=1, runtime_early_ms=900.0)


def test_the_classes_count_cuts_and_time_only_the_turns_not_cut():
    plays = [PausePlay("a … b", "paused", b"", 1.0), PausePlay("c … d", "paused", b"", 1.0),
             PausePlay("go", "complete", b"", 0.0)]
    summary = class_summary(plays, [True, False, False], [100.0, 500.0, 300.0])
    assert summary["paused"] == {"utterances": 2, "cut": 1, "cut_answered_whole": 0, "heard_as_cut": 1,
                                 "heard_p50_ms": 500.0, "heard_p90_ms": 500.0}
    assert summary["complete"]["cut"] == 0 and summary["complete"]["heard_p50_ms"] == 300.0
    assert voice_pauses.CUT_EARLY_MS < 300  # shorter than the corpus's shortest pause before a last part


def test_a_transcript_covers_an_utterance_when_it_holds_most_of_its_words():
    from toy_runtime.bench.voice_pauses import covers

    assert covers("I want um a story about a dragon", "I want a story about a dragon.")  # the filler dropped
    assert covers("set a reminder for eight o'clock", "Set a reminder for 8 o'clock.")
    assert not covers("my friend Tom has a red bike", "Has a red bike.")  # the second part alone
    assert covers("我想听 嗯 一个小兔子的故事", "我想听一个小兔子的故事。")
    assert not covers("我的朋友 有一辆红色的自行车", "有一辆红色的自行车。")


def test_a_cut_answered_whole_before_the_toy_sounded_is_not_heard_as_one():
    plays = [PausePlay("a … b", "paused", b"", 1.0), PausePlay("c … d", "paused", b"", 1.0),
             PausePlay("e … f", "paused", b"", 1.0)]
    # 1: cut, answered whole, silent meanwhile; 2: cut, answered whole, but the toy had sounded; 3: cut, answered part
    summary = class_summary(plays, [True, True, True], [400.0, 900.0, 300.0], [True, True, False],
                            [False, True, False])
    assert summary["paused"]["cut"] == 3 and summary["paused"]["cut_answered_whole"] == 2
    assert summary["paused"]["heard_as_cut"] == 2 and summary["paused"]["heard_p50_ms"] == 400.0


def test_an_utterance_is_answered_whole_only_by_an_uninterrupted_turn_with_its_first_part():
    from toy_runtime.bench.voice_pauses import answered_whole

    play = PausePlay("小猫 … 为什么会呼噜", "paused", b"", 1.0)
    assert answered_whole(play, "小猫为什么会呼噜？", interrupted=False)
    assert not answered_whole(play, "为什么会呼噜？", interrupted=False)  # the tail alone: 6 of 8 characters
    assert not answered_whole(play, "小猫为什么会呼噜？", interrupted=True)
    assert not answered_whole(play, None, interrupted=False)
