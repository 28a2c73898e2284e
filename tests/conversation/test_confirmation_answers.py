"""`session/answers.read_answer`: a plain yes or no in English or Chinese, and nothing else counts as one."""

from __future__ import annotations

import pytest

from toy_runtime.session.answers import read_answer

YES = ["yes", "Yeah!", "sure", "okay", "OK.", "do it", "Sure, do it.", "yes please", "um, yes", "go ahead",
       "好", "好的", "是", "是的", "对", "可以", "嗯，好吧", "好的！"]
NO = ["no", "Nope.", "don't", "Don’t do it!", "do not", "cancel", "cancel that", "never mind", "no thanks",
      "不", "不要", "别", "算了", "取消", "不是", "不用了", "算了吧"]
# a new topic, a doubtful answer, or more than an answer: never a yes
NEITHER = ["", "please", "no, do it", "yes and tell me a story", "I don't know", "what is a whale", "yes 7",
           "好的不要", "是什么", "对了，我们玩吧", "ok 好", "don't stop the music", "不知道",
           "yes " * 40]


@pytest.mark.parametrize("text", YES)
def test_a_plain_yes(text):
    assert read_answer(text) == "yes"


@pytest.mark.parametrize("text", NO)
def test_a_plain_no(text):
    assert read_answer(text) == "no"


@pytest.mark.parametrize("text", NEITHER)
def test_anything_else_is_no_answer(text):
    assert read_answer(text) is None
