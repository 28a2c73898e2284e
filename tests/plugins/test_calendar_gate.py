"""Offline (no LLM endpoint, or a failed model call), a clear reminder request is handled by the calendar resolver
through the offline gate — made and confirmed, or its one question asked — instead of "I can't think right now".
Unit cases of `gate_match` here; the whole path through a real `toy-runtime chat` in
tests/cli/test_offline_reminders.py."""

from __future__ import annotations

import pytest

from toy_runtime.plugins.calendar_schedule import gate_match

from .helpers import ctx


@pytest.mark.parametrize("utterance", [
    "remind me to brush my teeth tomorrow at 7 am",
    "remind me tomorrow morning to brush my teeth",
    "hey, can you remind me to read at 8 pm",
    "remind me to eat bread and butter at noon",
    "wake me up at 6:30 tomorrow",
    "please set an alarm for 6:30 am",
    "don't let me forget to water the plants",
    "remind me to water the plants",  # no time: the resolver asks its one question
    "明天早上提醒我刷牙",
    "提醒我浇花",
])
def test_clear_reminder_requests_match(utterance):
    assert gate_match(ctx(utterance))


@pytest.mark.parametrize("utterance", [
    "can you remind me what pandas eat",
    "tell me a story",
    "I brushed my teeth this morning",
    "remind me to feed the cat and make it louder",  # two requests: one must not be dropped silently
    "turn it down and remind me to feed the cat at 5 pm",
    "把声音调小，然后提醒我喂猫",
    "",
])
def test_other_words_do_not(utterance):
    assert not gate_match(ctx(utterance))


def test_an_answer_to_our_question_matches_only_when_it_answers():
    asked_time = [{"role": "user", "content": "remind me to water the plants"},
                  {"role": "assistant", "content": "What time should I remind you?"}]
    assert gate_match(ctx("at 5 pm", history=asked_time))
    assert gate_match(ctx("下午五点", history=asked_time))
    assert not gate_match(ctx("never mind, tell me a joke", history=asked_time))
    asked_title = [{"role": "user", "content": "set an alarm for 6:30 am"},
                   {"role": "assistant", "content": "What should I remind you about?"}]
    assert gate_match(ctx("brush my teeth", history=asked_title))
    other = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello! What time is it?"}]
    assert not gate_match(ctx("at 5 pm", history=other))
