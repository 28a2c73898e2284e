"""Speech segmentation: whole sentences as early as possible, an early first clause, no false cuts."""

from __future__ import annotations

import pytest

from toy_runtime.agent.sentences import SpeechSplitter


def split(text: str, step: int = 1, **kwargs) -> list[str]:
    splitter = SpeechSplitter(**kwargs)
    out: list[str] = []
    for i in range(0, len(text), step):
        out.extend(splitter.feed(text[i : i + step]))
    return out + splitter.flush()


def test_sentences_latin():
    assert split("Hello there. How are you? I'm fine! Bye") == ["Hello there.", "How are you?", "I'm fine!", "Bye"]


def test_cjk_sentences_are_cut_without_waiting_for_more_text():
    splitter = SpeechSplitter()
    assert splitter.feed("你好。") == ["你好。"]
    assert splitter.feed("今天天气很好！我们去公") == ["今天天气很好！"]
    assert splitter.feed("园吧？") == ["我们去公园吧？"]
    assert splitter.flush() == []


def test_period_waits_for_one_more_character_question_mark_does_not():
    splitter = SpeechSplitter()
    assert splitter.feed("Hello there.") == []
    assert splitter.feed(" ") == ["Hello there."]
    assert splitter.feed("Really?") == ["Really?"]


@pytest.mark.parametrize(
    "text",
    [
        "It costs 3.5 dollars today.",
        "Ask Mr. Brown and Dr. Who about it.",
        "Bring fruit, e.g. apples and i.e. nothing else.",
        "Say hi to J. Smith for me.",
        "Wait...what did you say?",
        "Visit example.com later.",
        "It is 10:30 and we have 1,000 toys.",
    ],
)
def test_no_false_cuts(text):
    assert split(text) == [text]


def test_ellipsis_followed_by_space_is_a_pause_boundary():
    assert split("Well... I think so.") == ["Well...", "I think so."]


def test_list_numbers_do_not_become_segments():
    assert split("1. First thing.\n2. Second thing.") == ["1. First thing.", "2. Second thing."]


def test_closing_quotes_stay_with_their_sentence():
    text = 'She said "go!" Then she left.'
    assert split(text, step=len(text)) == ['She said "go!"', "Then she left."]
    # Streamed one character at a time "!" is spoken at once; the late quote is not carried into the next one.
    assert split(text) == ['She said "go!', "Then she left."]


def test_newline_ends_a_segment():
    assert split("First line\nSecond line") == ["First line", "Second line"]


def test_early_first_clause_latin():
    text = "Okay, no problem at all, I will turn it down now. After that, we can play."
    assert split(text) == ["Okay, no problem at all,", "I will turn it down now.", "After that, we can play."]


def test_early_first_clause_cjk():
    text = "好的，我马上帮你把音量调低，请稍等。然后，我们继续玩。"
    assert split(text) == ["好的，我马上帮你把音量调低，", "请稍等。", "然后，我们继续玩。"]


def test_first_clause_threshold_is_configurable_and_can_be_disabled():
    text = "Sure, I can do that. Done."
    assert split(text, first_clause_min_chars=4) == ["Sure,", "I can do that.", "Done."]
    assert split("Okay, no problem at all, I will.", first_clause_min_chars=0) == ["Okay, no problem at all, I will."]


def test_clause_cut_needs_whitespace_after_latin_mark():
    splitter = SpeechSplitter(first_clause_min_chars=3)
    assert splitter.feed("We have 1,") == []
    assert splitter.feed("000 toys, more") == ["We have 1,000 toys,"]


def test_korean_uses_the_cjk_threshold_and_latin_punctuation():
    assert split("네, 알겠습니다. 볼륨을 낮출게요.") == ["네, 알겠습니다.", "볼륨을 낮출게요."]
    assert split("지금 바로 볼륨을, 낮출게요.") == ["지금 바로 볼륨을,", "낮출게요."]


def test_flush_returns_the_rest_and_rearms_the_first_clause():
    splitter = SpeechSplitter()
    assert splitter.feed("Okay, no problem at all, here") == ["Okay, no problem at all,"]
    assert splitter.flush() == ["here"]
    assert splitter.pending == ""
    assert splitter.feed("So, well, here we go again, and more") == ["So, well, here we go again,"]


def test_punctuation_only_segments_are_dropped():
    assert split("Hi!?! ... \n\n!", step=100) == ["Hi!?!"]
    assert split("Really?!", step=7) == ["Really?"]  # "!" arriving alone after the cut is not spoken


@pytest.mark.parametrize("step", [1, 2, 3, 5, 8, 13, 1000])
def test_result_does_not_depend_on_chunking(step):
    text = (
        "Hello! The volume is now 3.5 steps lower, as you asked. Mr. Bear says hi. "
        "我们去公园吧。好的！\nNew line here... and done."
    )
    assert split(text, step=step) == split(text, step=len(text))
    assert "".join(split(text, step=step)).replace(" ", "") == text.replace(" ", "").replace("\n", "")
