"""The words behind issue 27's checks: what the child asked for (plugins/intent.py), what the toy claims
(plugins/claims.py), and the volume plugin's `supports` for silencing."""

from __future__ import annotations

import pytest

from toy_runtime.plugins.claims import claims_farewell, claims_reminder, claims_volume
from toy_runtime.plugins.intent import asks_for_quiet, asks_to_leave, says_repeat

from .helpers import ctx

VOLUME = "device.volume.adjust"


@pytest.mark.parametrize("sentence, claim", [
    ("Okay, I've lowered the volume to ten.", True), ("I'll turn the sound down for you.", True),
    ("好的，已经把音量调到十了。", True), ("音量调到十了。", True),
    ("What volume do you like?", False), ("The sound of the sea is lovely.", False), ("声音很好听。", False),
])
def test_volume_claims(sentence, claim):
    assert claims_volume(sentence) is claim


@pytest.mark.parametrize("sentence, claim", [
    ("Bye!", True), ("Bye bye!", True), ("Okay, goodbye for now!", True), ("再见！", True), ("拜拜啦！", True),
    ("Goodbye is a long word.", False), ("Say bye to the cat!", False), ("He waved bye bye to the moon.", False),
])
def test_farewell_claims(sentence, claim):
    assert claims_farewell(sentence) is claim


@pytest.mark.parametrize("sentence, claim", [
    ("I've set a reminder for three.", True), ("I'll remind you to feed the cat.", True), ("我会提醒你的。", True),
    ("Reminders help us remember.", False), ("Do you want a reminder?", False), ("你想要我提醒你吗？", False),
])
def test_reminder_claims(sentence, claim):
    assert claims_reminder(sentence) is claim


def test_the_childs_intents():
    assert asks_to_leave("ok I have to go") and asks_to_leave("晚安") and not asks_to_leave("volume at forty")
    assert asks_for_quiet("be quiet") and asks_for_quiet("静音") and not asks_for_quiet(
        "remind me to feed the cat tomorrow at three")
    assert says_repeat("every day at seven") and says_repeat("on Saturdays") and says_repeat("每天")
    assert not says_repeat("tomorrow at three") and not says_repeat("on Saturday") and not says_repeat("明天三点")


def test_silencing_needs_the_words(registry):
    supports = registry.get(VOLUME).supports
    assert not supports({"mode": "mute"}, ctx("remind me to feed the cat tomorrow at three"))
    assert not supports({"mode": "absolute", "value": 0}, ctx("tell me a story"))
    assert supports({"mode": "mute"}, ctx("mute please")) and supports({"mode": "mute"}, ctx("安静一点"))
    assert supports({"mode": "absolute", "value": 0}, ctx("volume zero"))
    assert supports({"mode": "absolute", "value": 40}, ctx("turn the volume to forty"))


def test_any_volume_change_needs_words_about_the_sound(registry):
    """On the real 1.5B model a weather question became "volume 20", a joke "+10", and "大熊猫一天吃多少竹子" was
    read as "volume 1" (issue 27): a change the model proposes needs the child to talk about the sound."""
    supports = registry.get(VOLUME).supports
    up = {"mode": "relative", "delta": 10}
    for words in ("帮我查一下今天北京的天气", "讲个笑话吧", "上网搜一下大熊猫一天吃多少竹子", "tell me a story",
                  "what is 20 plus 20"):
        assert not supports(up, ctx(words)), words
    for words in ("Can you talk a little louder?", "I can't hear you", "太吵了", "That was fun. Turn it down and bye!",
                  "声音大一点", "speak up please"):
        assert supports(up, ctx(words)), words
    # a bare setting right after the child talked about the sound ("Change the volume." → "Make it 70.")
    about = [{"role": "user", "content": "Change the volume."}, {"role": "assistant", "content": "To what?"}]
    assert supports({"mode": "absolute", "value": 70}, ctx("Make it 70.", history=about))
    assert supports({"mode": "absolute", "value": 60}, ctx("调到六十", history=[{"role": "user", "content": "调一下音量"}]))
    story = [{"role": "user", "content": "Tell me a story."}]
    assert not supports({"mode": "absolute", "value": 70}, ctx("70.", history=story))
    assert supports({"mode": "absolute", "value": 70}, ctx("70.", history=about))
    # "set it to 30" said to a toy: its "it" is the sound
    assert supports({"mode": "absolute", "value": 30}, ctx("set it to 30"))
