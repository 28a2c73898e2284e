"""What a volume request settles: the child's words (English or Chinese) and a proposal's arguments, field by field.

`hear` reads the words (a level, a direction, a step, mute/unmute; numbers inside time words drop out),
`read_proposal` reads proposed arguments, `merge` lets the words win and the proposal fill only what they leave open (design §3.2).
`device_volume.py` turns the merged `Said` into arguments or the one focused question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import ToyError
from ..events.definition import ResolveContext
from .numbers import NumberSpan, find_numbers, normalize, parse_number
from .repeats import parse_recurrence, parse_reminder_offset
from .text import blank_spans
from .timeparse import parse_when

__all__ = ["BadNumber", "Said", "hear", "merge", "read_proposal"]

# mode words a provider (or the EventAgent) may use → (mode, direction of a relative change)
_MODE_ALIASES: dict[str, tuple[str, int | None]] = {
    "absolute": ("absolute", None), "set": ("absolute", None), "level": ("absolute", None),
    "relative": ("relative", None), "change": ("relative", None), "adjust": ("relative", None),
    "up": ("relative", 1), "increase": ("relative", 1), "louder": ("relative", 1), "raise": ("relative", 1),
    "down": ("relative", -1), "decrease": ("relative", -1), "quieter": ("relative", -1), "lower": ("relative", -1),
    "mute": ("mute", None), "silence": ("mute", None), "unmute": ("unmute", None),
}

_UNMUTE = re.compile(r"\bun-?mute\b|\bturn\s+(?:the\s+)?(?:sound|volume|audio)\s+back\s+on\b|\bsound\s+back\s+on\b"
                     r"|取消静音|解除静音|关闭静音|关掉静音|恢复声音|打开声音")
_MUTE = re.compile(r"\bmute\b|\bsilence\b|\b(?:turn\s+)?(?:the\s+)?(?:sound|volume|audio)\s+off\b|静音|关掉声音|关闭声音"
                   r"|把声音关")
_MAX = re.compile(r"\bmax(?:imum)?\b|\bfull\s+volume\b|\ball\s+the\s+way\s+up\b|\bloudest\b|最大|最响")
_MIN = re.compile(r"\bmin(?:imum)?\b|\ball\s+the\s+way\s+down\b|\bquietest\b|\blowest\b|最小|最低")
_UP = re.compile(r"\b(?:up|louder|increase|raise|higher|boost|more)\b"
                 r"|调大|调高|开大|放大|加大|提高|增大|增加|升高|大声|大点|大一点|大些|大一些|响一?点|高一?点|加")
_DOWN = re.compile(r"\b(?:down|quieter|softer|lower|decrease|reduce|less|quiet)\b"
                   r"|调小|调低|关小|减小|降低|减少|小声|小点|小一点|小些|小一些|轻一?点|低一?点|减|降")
_A_BIT_ZH = re.compile(r"一点儿?|一些|一下|点儿")  # "a bit", not the number one
_REL_BEFORE = re.compile(r"(?:\bby|(?P<up>调大|调高|加大|增加|提高|升高|加|大)|(?P<down>调小|调低|减小|减少|降低|减|降|小))\s*$")
_TOO_QUIET = re.compile(r"\btoo\s+(?:quiet|soft|low)\b|can'?t\s+hear|太小|太轻|听不见|听不清")
_TOO_LOUD = re.compile(r"\btoo\s+loud\b|太大|太响|太吵")
_ABS_BEFORE = re.compile(r"(?:\bto|\bat|\bvolume|\blevel|\bset|调到|调成|调至|设为|设成|设置为|设置成|设到|开到|放到|变成"
                         r"|改成|改为|到|为|成|音量|声音|百分之)\s*$")


class BadNumber(ToyError, ValueError):
    """A proposed argument that is not a whole number."""

    code = "invalid_arguments"


_VOLUME_AT = re.compile(r"\b(?:volume|sound|level|it)\s+$")


def volume_numbers(s: str, ctx: ResolveContext) -> list[NumberSpan]:
    """Numbers that may be the volume: numbers inside time words ("in 10 minutes", "明天早上7点") drop out, and
    when several remain, only those right after a volume verb ("to 30", "by 20", "调小二十") count."""
    numbers = find_numbers(blank_spans(s, [m.span() for m in _A_BIT_ZH.finditer(s)]))
    # "调一调" / "试一试": a verb doubled around 一 means "a little", never the number one
    numbers = [n for n in numbers
               if not (s[n.start:n.end] == "一" and 0 < n.start and n.end < len(s) and s[n.start - 1] == s[n.end])]
    if not numbers:
        return numbers
    try:
        spans = list(parse_when(s, ctx.request_time, ctx.timezone).spans)
    except ValueError:  # unknown zone or naive clock: no time words can be recognised
        spans = []
    spans += parse_recurrence(s)[1] + parse_reminder_offset(s)[1]
    # "set the volume at 10" is a level, not ten o'clock
    spans = [(a, b) for a, b in spans
             if not (re.fullmatch(r"\s*at\s+\d{1,3}\s*", s[a:b]) and _VOLUME_AT.search(s[:a]))]
    numbers = [n for n in numbers if not any(a < n.end and n.start < b for a, b in spans)]
    if len({n.value for n in numbers}) <= 1:
        return numbers
    marked = [n for n in numbers if _REL_BEFORE.search(s[: n.start]) or _ABS_BEFORE.search(s[: n.start])]
    return marked if len({n.value for n in marked}) == 1 else numbers


def said_direction(s: str) -> int | None:
    """+1 louder, -1 quieter, None when not said or contradictory ("up ... down")."""
    if _TOO_QUIET.search(s):
        return 1
    if _TOO_LOUD.search(s):
        return -1
    up, down = bool(_UP.search(s)), bool(_DOWN.search(s))
    return 1 if up and not down else -1 if down and not up else None


def whole_number(raw: Any, *, signed: bool) -> int:
    if isinstance(raw, bool):
        raise BadNumber(raw)
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float):
        if raw.is_integer():
            return int(raw)
        raise BadNumber(raw)
    if isinstance(raw, str):
        text = normalize(raw).strip().removesuffix("%").strip()
        sign = 1
        for prefix, value in (("+", 1), ("-", -1), ("minus ", -1), ("plus ", 1), ("负", -1), ("减", -1), ("加", 1)):
            if signed and text.startswith(prefix):
                sign, text = value, text[len(prefix):].strip()
                break
        number = parse_number(text)
        if number is None:
            raise BadNumber(raw)
        return sign * number
    raise BadNumber(raw)


@dataclass(frozen=True)
class Said:
    """What one source (the child's words, or proposed arguments) settles about a volume change.

    `mode` absolute|relative|mute|unmute or None when not settled; `value` an absolute level; `sign` +1/-1 and
    `amount` (magnitude) of a relative change, each None when left open; `choices` several different numbers were
    said and the level or amount is one of them; `torn` louder and quieter were both said.
    """

    mode: str | None = None
    value: int | None = None
    sign: int | None = None
    amount: int | None = None
    choices: tuple[int, ...] = ()
    torn: bool = False

    def settled(self) -> bool:
        """True when nothing is left open: a mute/unmute, a level, or a change with its direction and size."""
        return self.mode in ("mute", "unmute") or (self.mode == "absolute" and self.value is not None) or (
            self.mode == "relative" and self.sign is not None and self.amount is not None)

    @property
    def empty(self) -> bool:
        """True when nothing about the volume was settled."""
        return self == Said()


def hear(text: str, ctx: ResolveContext) -> Said:
    """What the user's words (English or Chinese) settle, field by field."""
    s = normalize(text or "")
    if _UNMUTE.search(s):
        return Said(mode="unmute")
    if _MUTE.search(s):
        return Said(mode="mute")
    direction = said_direction(s)
    numbers = volume_numbers(s, ctx)
    torn = direction is None and bool(_UP.search(s) and _DOWN.search(s))
    if len({n.value for n in numbers}) > 1:
        return Said(sign=direction, choices=tuple(dict.fromkeys(n.value for n in numbers)), torn=torn)
    if not numbers:
        if _MAX.search(s):
            return Said(mode="absolute", value=100)
        if _MIN.search(s):
            return Said(mode="absolute", value=0)
        return Said(mode="relative", sign=direction) if direction is not None else Said(torn=torn)
    number = numbers[0]
    before = s[: number.start]
    if rel := _REL_BEFORE.search(before):
        sign = 1 if rel.group("up") else -1 if rel.group("down") else direction  # "调小二十" names its own sign
        return Said(mode="relative", sign=sign, amount=number.value, torn=torn)
    if _ABS_BEFORE.search(before) or direction is None:
        return Said(mode="absolute", value=number.value)
    return Said(mode="relative", sign=direction, amount=number.value)  # "turn it up 20", "louder 20"


def read_proposal(given: Mapping[str, Any]) -> Said:
    """What proposed arguments (ChatAgent tool call or EventAgent answer) settle; raises BadNumber / KeyError."""
    mode = sign = None
    if "mode" in given:
        mode, sign = _MODE_ALIASES[str(given["mode"]).strip().lower()]
    value = whole_number(given["value"], signed=False) if "value" in given else None
    delta = whole_number(given["delta"], signed=True) if "delta" in given else None
    if mode is None:
        mode = "absolute" if value is not None and delta is None else "relative" if delta is not None and value is None \
            else None
    amount = None
    if delta is not None:
        amount = abs(delta)
        if sign is None and delta != 0:
            sign = 1 if delta > 0 else -1
    return Said(mode=mode, value=value, sign=sign, amount=amount)


def merge(said: Said, offered: Said) -> Said:
    """The child's words win field by field; the proposal only fills what the words leave open."""
    if said.mode in ("mute", "unmute") or said.mode == "absolute":
        return said
    if said.choices:
        # several numbers were said: a proposal may pick one of them, never bring a new one
        if offered.mode == "absolute" and offered.value in said.choices:
            return Said(mode="absolute", value=offered.value)
        if offered.mode == "relative" and offered.amount in said.choices:
            return Said(mode="relative", sign=said.sign if said.sign is not None else offered.sign,
                         amount=offered.amount, torn=said.torn)
        return said
    if said.mode == "relative":
        sign = said.sign if said.sign is not None else (None if said.torn else offered.sign)
        amount = said.amount
        if amount is None and offered.mode == "relative" and offered.sign in (None, sign):
            amount = offered.amount  # "louder" leaves the size open; a proposal in the same direction fills it
        return Said(mode="relative", sign=sign, amount=amount, torn=said.torn)
    if said.torn:  # "up or down?" — the child has not decided; a proposal must not decide for them
        return said
    return offered
