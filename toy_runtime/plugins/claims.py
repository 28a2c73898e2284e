"""Whether one sentence the toy speaks claims an action: a volume change, a goodbye, a reminder (en and zh).

Used to find a promise without its event ("Okay, I've lowered the volume to ten." when nothing ran). Deliberately
about the toy's own first-person claims and farewells, not about mentions ("what volume do you like?").
"""

from __future__ import annotations

import re

from .numbers import normalize

_VOLUME = re.compile(
    r"\b(?:i'?ve|i\s+have|i\s+just|i'?ll|i\s+will|i'?m\s+going\s+to|let\s+me)\s+(?:now\s+)?"
    r"(?:set|turned|turn|lowered|lower|raised|raise|changed|change|adjusted|adjust|muted|mute|unmuted|unmute|made"
    r"|make|put|brought|bring|dropped|drop|cranked|crank)\b[^.!?]*?"
    r"\b(?:volume|sound|louder|quieter|softer|down|up|mute|muted)\b"
    r"|\b(?:volume|sound)\s+(?:is\s+|has\s+been\s+)?(?:now\s+)?(?:set|turned|lowered|raised|changed|muted|at)\b"
    r"|\b(?:muting|unmuting)\s+(?:now|it|the)\b|\bi'?m\s+muted\b"
    r"|(?:已经|已|帮你)(?:把)?(?:音量|声音)|(?:音量|声音)(?:已经)?(?:调|设|降|升|开|关)(?:到|成|低|高|小|大|好|了)"
    r"|(?:调|设)(?:到|成)了|静音了|(?:调小|调大|调低|调高)了")
_FAREWELL = re.compile(
    r"^(?:(?:ok(?:ay)?|alright|well|sure|all\s+right)[\s,!.]*)?"
    r"(?:good\s*-?\s*bye|bye(?:[\s-]+bye)?|see\s+you(?:\s+(?:later|soon|tomorrow|next\s+time))?|good\s*night"
    r"|talk\s+to\s+you\s+(?:later|soon)|拜拜|再见|晚安|下次再聊|回头见)"
    r"(?:[\s,!.。！~]*(?:now|for\s+now|friend|buddy|little\s+one|啦|了|吧|哦|呀))*[\s,!.。！~]*$")
_REMINDER = re.compile(
    r"\b(?:i'?ve|i\s+have|i\s+just)\s+(?:set|added|made|created|scheduled|put|saved)\b[^.!?]*?"
    r"\b(?:reminder|alarm|calendar|schedule)\b"
    r"|\b(?:i'?ll|i\s+will|i'?m\s+going\s+to)\s+remind\s+you\b|\breminder\s+(?:is\s+|has\s+been\s+)?(?:set|added|saved)\b"
    r"|(?:我会|我将|到时候?|会)提醒你|(?:设|定|加|添加)(?:好|了)[^。！？]*(?:提醒|闹钟)|已经[^。！？]*(?:提醒|闹钟)")


def claims_volume(sentence: str) -> bool:
    """"Okay, I've lowered the volume to ten." / "已经把音量调到十了。" """
    return bool(_VOLUME.search(normalize(sentence or "")))


def claims_farewell(sentence: str) -> bool:
    """A sentence that is a goodbye ("Bye!", "Okay, goodbye for now!", "再见！"): the toy says it is leaving."""
    return bool(_FAREWELL.match(normalize(sentence or "").strip()))


def claims_reminder(sentence: str) -> bool:
    """"I've set a reminder…", "I'll remind you…", "我会提醒你…" """
    return bool(_REMINDER.search(normalize(sentence or "")))
