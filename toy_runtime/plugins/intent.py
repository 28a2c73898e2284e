"""What the child's words ask for, loosely: a farewell or stop, the sound, a mute or quiet, a repeat rule (en and zh).

Looser than the gate's `gate_match` (which must be sure enough to act without a model): these only decide whether a
disruptive action the MODEL proposed is supported by the words at all ("ok bye, thanks for the story" supports
ending the session; "volume at forty" does not), and whether a proposed repeat rule may stand.
"""

from __future__ import annotations

import re

from .numbers import normalize

_FAREWELL = re.compile(
    r"\b(?:good\s*-?\s*bye|bye|see\s+you|see\s+ya|good\s*night|night\s+night|talk\s+(?:to\s+you\s+)?later"
    r"|i'?m\s+done|that'?s\s+all|(?:i\s+)?(?:have|need|got)\s+to\s+go|gotta\s+go|i'?m\s+leaving"
    r"|stop\s+talking|be\s+quiet\s+now|go\s+to\s+sleep|end\s+(?:the\s+|our\s+|this\s+)?(?:chat|conversation|session)"
    r"|(?:stop|quit)(?:\s+(?:the\s+|our\s+)?(?:chat|conversation|talking|game))?(?:\s+(?:now|please))?[\s!.]*$)"
    r"|再见|拜拜|晚安|不聊了|不说了|不玩了|我走了|我要走了|先这样|下次再聊|回头聊|结束|睡觉了|别说了")
_MUTE = re.compile(
    r"\b(?:un-?)?mute\b|\bsilence\b|\bsilent\b|\bquiet\b|\bshh+\b|\bhush\b|\bno\s+sound\b"
    r"|\b(?:sound|volume|audio|speaker)\s+(?:off|to\s+(?:zero|0))\b|\b(?:turn|switch)\s+(?:the\s+)?(?:sound|volume|audio)\s+off\b"
    r"|静音|安静|关掉声音|关闭声音|把声音关|别出声|不要出声|嘘")
_REPEAT = re.compile(
    r"\b(?:every|each|daily|weekly|weekdays?|weekends|repeat(?:ing|edly)?|always|everyday|nightly|mornings"
    r"|(?:mon|tues|wednes|thurs|fri|satur|sun)days)\b"
    r"|每|天天|重复|工作日|周末")


def _says(pattern: re.Pattern[str], text: str | None) -> bool:
    """True when the normalized words contain `pattern` anywhere."""
    return bool(pattern.search(normalize(text or "")))


def asks_to_leave(text: str) -> bool:
    """The words say goodbye or ask to stop ("bye bye", "I have to go", "再见", "不聊了")."""
    return _says(_FAREWELL, text)


_SOUND = re.compile(
    r"\b(?:volume|sound|loud(?:er|ly)?|quiet(?:er)?|soft(?:er|ly)?|un-?mute|mute|speak\s+up|can'?t\s+hear"
    r"|turn\s+(?:it|you|yourself)\s+(?:up|down)|too\s+noisy|noisy)\b"
    r"|音量|声音|大声|小声|静音|听不见|听不清|太吵|吵死|好吵|大点声|小点声|轻一点|轻点")


def asks_about_sound(text: str) -> bool:
    """The words are about the toy's sound ("louder", "turn it down", "I can't hear you", "太吵了")."""
    return _says(_SOUND, text)


def asks_for_quiet(text: str) -> bool:
    """The words ask for silence ("mute", "be quiet", "sound off", "静音", "安静")."""
    return _says(_MUTE, text)


def says_repeat(text: str) -> bool:
    """The words hold a repeat word ("every", "daily", "on Saturdays", "每天", "重复"): a repeat rule may stand."""
    return _says(_REPEAT, text)
