"""Long sentences are cut at clause marks into pieces the voice synthesizes quickly and in bounded memory."""

from __future__ import annotations

from toy_runtime.speech_out.clauses import clause_pieces, spoken_clauses

LONG = "OK, I'll remind you to brush your teeth on Wednesday, December 2 at 8:00 AM, and I will not forget it."


def test_a_short_sentence_stays_whole():
    assert clause_pieces("Sure, here you go.", 80) == ["Sure, here you go."]
    assert clause_pieces("  ", 80) == []
    assert clause_pieces(LONG, 0) == [LONG]  # 0: never cut


def test_a_long_sentence_is_cut_after_clause_marks_into_bounded_pieces():
    pieces = clause_pieces(LONG, 60)
    assert len(pieces) > 1 and all(len(p) <= 60 for p in pieces)
    assert all(p.rstrip()[-1] in ",." for p in pieces)  # every cut is after a clause mark, the last ends the text
    assert " ".join(pieces) == LONG  # nothing lost, nothing added
    # clauses are packed greedily: no two neighbours would have fitted together
    assert all(len(a) + 1 + len(b) > 60 for a, b in zip(pieces, pieces[1:]))


def test_numbers_and_times_are_never_cut():
    text = "We counted 1,000 stars at 10:30 tonight and then we counted 2,000 more of them, all of them bright."
    pieces = clause_pieces(text, 40)
    assert any("1,000 stars at 10:30" in p for p in pieces)
    assert " ".join(pieces) == text


def test_a_long_clause_without_marks_stays_whole_and_cjk_cuts_without_spaces():
    run_on = "a very long clause without any mark that just goes on and on and on"
    assert clause_pieces(run_on + ", then more.", 30) == [run_on + ",", "then more."]
    cjk = "我明天早上八点提醒你刷牙，不会忘记的，我保证一定会记得这件事情。"
    pieces = clause_pieces(cjk, 12)
    assert len(pieces) > 1 and "".join(pieces) == cjk


def test_a_clause_by_clause_voice_never_cuts_a_time_or_a_number():
    """The Mandarin voices speak clause by clause: "8:00" cut after its colon was read as "8", a pause, "00"."""
    assert spoken_clauses("好的，12月5日 上午8:00 提醒你：刷牙。") == ["好的，", "12月5日 上午8:00 提醒你：", "刷牙。"]
    assert spoken_clauses("Okay, bye. 3.5 is fine!") == ["Okay,", "bye.", "3.5 is fine!"]
    assert spoken_clauses("。！") == []  # nothing to say
