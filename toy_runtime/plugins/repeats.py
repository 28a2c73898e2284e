"""Repeat rules ("every weekday", "每天") and advance warnings ("10 minutes before", "提前10分钟") in English and Chinese.

Split from `timeparse`, which reads the one point in time; the calendar plugin reads all three from the same words.
"""

from __future__ import annotations

import re
from typing import Any

from .numbers import NUMBER_PATTERN
from .timeparse import WEEKDAY_CODES, normalize_text
from .timescan import (  # the shared vocabulary: repeats speak the same words as one-off times
    _EN_UNIT_MINUTES,
    _EN_WEEKDAYS,
    _WD_EN,
    _ZH_NUM,
    _ZH_UNIT_MINUTES,
    _ZH_WEEKDAY,
    Span,
    _number,
)

_F = re.IGNORECASE

_EN_WEEKDAYS_REC = re.compile(
    r"\b(?:every\s+week\s*day|each\s+week\s*day|every\s+work\s*day|on\s+weekdays|weekdays"
    r"|(?:monday|mon)\s+(?:to|through|thru|-)\s+(?:friday|fri))\b", _F)
_EN_WEEKLY_DAYS = re.compile(
    rf"\b(?:every|each)\s+(?:{_WD_EN})(?:\s*(?:,|and|&|or)\s*(?:(?:every|each)\s+)?(?:{_WD_EN}))*\b"
    rf"|\bon\s+(?:{_WD_EN})s(?:\s*(?:,|and|&)\s*(?:{_WD_EN})s)*\b", _F)
_EN_WEEKLY = re.compile(r"\b(?:every\s+week|each\s+week|weekly|once\s+a\s+week)\b", _F)
_EN_DAILY = re.compile(
    r"\b(?:every\s*day|each\s+day|daily|every\s+single\s+day)\b|\bevery(?=\s+(?:morning|afternoon|evening|night)\b)",
    _F)
_ZH_WEEKDAYS_REC = re.compile(r"(?:每个?)?工作日|(?:每)?(?:周|星期)一(?:到|至)(?:周|星期)?五")
_ZH_WEEKLY_DAYS = re.compile(
    r"每个?(?:周|星期|礼拜)(?P<days>[一二三四五六日天](?:\s*[、,，和与及跟]?\s*(?:周|星期|礼拜)?[一二三四五六日天])*)")
_ZH_WEEKLY = re.compile(r"每个?(?:周|星期|礼拜)(?![一二三四五六日天])")
_ZH_DAILY = re.compile(r"每天|每日|天天|每个?(?=早上|早晨|晚上|上午|下午|中午)")


def parse_recurrence(text: str) -> tuple[dict[str, Any] | None, tuple[Span, ...]]:
    """A repeat rule in `text` and the spans it used.

    {"frequency": "daily"} | {"frequency": "weekdays"} | {"frequency": "weekly", "days": ["MO", "WE"]} |
    {"frequency": "weekly"} (days to be taken from the start date) | None.
    """
    s = normalize_text(text)
    for pattern in (_EN_WEEKDAYS_REC, _ZH_WEEKDAYS_REC):
        m = pattern.search(s)
        if m:
            return {"frequency": "weekdays"}, (m.span(),)
    days: set[int] = set()
    spans: list[Span] = []
    for m in _EN_WEEKLY_DAYS.finditer(s):
        days.update(_EN_WEEKDAYS.index(w.lower()) for w in re.findall(_WD_EN, m.group(0), _F))
        spans.append(m.span())
    for m in _ZH_WEEKLY_DAYS.finditer(s):
        days.update(_ZH_WEEKDAY[c] for c in m.group("days") if c in _ZH_WEEKDAY)
        spans.append(m.span())
    if days:
        return {"frequency": "weekly", "days": [WEEKDAY_CODES[d] for d in sorted(days)]}, tuple(spans)
    for pattern in (_EN_WEEKLY, _ZH_WEEKLY):
        m = pattern.search(s)
        if m:
            return {"frequency": "weekly"}, (m.span(),)
    for pattern in (_EN_DAILY, _ZH_DAILY):
        m = pattern.search(s)
        if m:
            return {"frequency": "daily"}, (m.span(),)
    return None, ()


_EN_OFFSET = re.compile(
    rf"(?:,?\s*(?:and\s+)?(?:please\s+)?(?:remind|alert|notify|warn|tell|ping)\s+me\s+)?"
    rf"(?:(?P<half>half\s+an?)|(?P<n>{NUMBER_PATTERN}|an?))\s+(?P<u>minutes?|mins?|hours?|hrs?)\s+"
    rf"(?:before(?:hand)?|ahead(?:\s+of\s+time)?|early|earlier|in\s+advance|prior)\b", _F)
_ZH_OFFSET = re.compile(
    rf"[,，]?\s*(?:请)?(?:提前\s*(?P<n>{_ZH_NUM}|半)\s*个?\s*(?P<u>分钟|分|小时|钟头)(?:\s*(?:提醒|通知|叫)(?:我|一下)?)?"
    rf"|(?P<n2>{_ZH_NUM}|半)\s*个?\s*(?P<u2>分钟|小时|钟头)\s*前\s*(?:提醒|通知|叫)(?:我|一下)?)")


def parse_reminder_offset(text: str) -> tuple[int | None, tuple[Span, ...]]:
    """Minutes of advance warning ("remind me 10 minutes before", "提前10分钟提醒") and the span used."""
    s = normalize_text(text)
    m = _EN_OFFSET.search(s)
    if m:
        unit = _EN_UNIT_MINUTES[m.group("u").lower().rstrip("s")]
        n_text = (m.group("n") or "").lower()
        amount = 0.5 if m.group("half") else 1 if n_text in ("a", "an") else _number(n_text)
        if amount is not None:
            return int(amount * unit), (m.span(),)
    m = _ZH_OFFSET.search(s)
    if m:
        n_text, unit_text = (m.group("n"), m.group("u")) if m.group("n") else (m.group("n2"), m.group("u2"))
        amount = 0.5 if n_text == "半" else _number(n_text)
        if amount is not None:
            return int(amount * _ZH_UNIT_MINUTES[unit_text]), (m.span(),)
    return None, ()
