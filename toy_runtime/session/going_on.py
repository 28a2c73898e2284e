"""A child who goes on: words she starts before the toy's answer could have reached her belong to the same turn.

The end of a turn is a prediction (audio/turn_end.py), and a child who pauses longer than it waits is cut off
("My friend Tom… [pause] …has a red bike"). With barge-in on, the toy hears her go on. If she started again soon
after her last words (`window_s`) and before she could have heard the answer (its first sound + `REACTION_S`), she
was not answering the toy: she was finishing her sentence. The answer stops, nothing of it is remembered, and the
two utterances are answered as one. Without this, the first part was lost: a cut-off answer nobody heard is not
remembered, so "has a red bike" went to the model alone.

Speech that starts later is a barge-in as before: what the child heard of the answer is remembered and her words
are the next turn.

Pure and stdlib-only.
"""

from __future__ import annotations

from ..language import has_cjk

__all__ = ["REACTION_S", "went_on", "joined_text"]

# A listener starts answering what she heard no sooner than this after it started: speech reaction times are
# 200 ms and more. Speech that starts sooner after the toy's first sound was begun before she heard it.
REACTION_S = 0.3


def went_on(*, first_ended_at: float, resumed_at: float, answer_audio_at: float | None, window_s: float) -> bool:
    """Whether speech that started at `resumed_at` goes on with the utterance that ended at `first_ended_at`, given
    when the answer to that utterance first sounded (`answer_audio_at`, None: not yet). All on one clock."""
    if window_s <= 0 or resumed_at - first_ended_at > window_s:
        return False
    return answer_audio_at is None or resumed_at < answer_audio_at + REACTION_S


def joined_text(first: str, second: str) -> str:
    """Two transcripts of one sentence said with a pause, as one: the period the recognizer put at the pause goes
    ("My friend Tom." + "Has a red bike." → "My friend Tom has a red bike."; "我的朋友。" + "有一辆自行车。" →
    "我的朋友有一辆自行车。"); a question or exclamation mark stays, as the child's own break."""
    first, second = first.strip(), second.strip()
    if not first or not second:
        return first or second
    cut = first.rstrip(".。")
    broke = cut != first
    cjk = has_cjk(cut[-1:]) or has_cjk(second[:1])
    if cjk:
        return cut + second
    if broke and second[:1].isupper() and not _keeps_capital(second):
        second = second[0].lower() + second[1:]
    return f"{cut} {second}"


def _keeps_capital(text: str) -> bool:
    """"I", "I'm", "OK"…: a first word whose capital is not the sentence's."""
    word = text.split(maxsplit=1)[0].rstrip(",.!?")
    return word == "I" or word.startswith("I'") or (len(word) > 1 and word.isupper())
