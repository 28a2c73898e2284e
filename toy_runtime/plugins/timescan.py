"""What a text says about time, before anything is placed on a calendar: the English and Chinese vocabulary
(patterns) and the scanner that turns one text into a `Scan` (durations, day words, dates, weekdays, part of day,
clock time, vague words, contradictions). `timeparse.parse_when` then places a `Scan` against the request time and
zone, following the reading rules documented there. Pure: no clock, no zone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

from ..language import has_cjk
from .numbers import NUMBER_PATTERN, ZH_NUMERAL_CHARS, parse_number
from .text import blank_spans

__all__ = ["ISO_DATETIME", "Scan", "Span", "day_phrase", "hour24", "scan_text"]

_F = re.IGNORECASE
_ZH_NUM = rf"(?:\d{{1,2}}|[{ZH_NUMERAL_CHARS}]{{1,3}})"
_EN_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WD_EN = "|".join(_EN_WEEKDAYS)
_ZH_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_MONTHS = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10,
           "nov": 11, "dec": 12}
_MONTH_RE = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
             r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_HOUR_WORDS = "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
_MIN_WORDS = (r"(?:twenty|thirty|forty|fifty)(?:[\s-](?:one|two|three|four|five|six|seven|eight|nine))?"
              r"|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen"
              r"|oh\s+(?:one|two|three|four|five|six|seven|eight|nine)")

ISO_DATETIME = re.compile(
    r"(?<!\d)(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)(z|[+-]\d{2}:?\d{2})?(?![\d:])", _F)
_ISO_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?![\dT:])")
_EN_DATE_MD = re.compile(rf"\b(?:on\s+)?(?P<mon>{_MONTH_RE})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b", _F)
_EN_DATE_DM = re.compile(
    rf"\b(?:on\s+)?(?:the\s+)?(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{_MONTH_RE})\b", _F)
_ZH_DATE = re.compile(rf"(?:(?P<y>\d{{4}})年)?(?P<mo>{_ZH_NUM})月(?P<d>{_ZH_NUM})(?:日|号)")

_EN_REL = re.compile(
    rf"\bin\s+(?:(?P<half>half\s+an?)|(?P<n>{NUMBER_PATTERN}|an?))\s+(?P<u>minutes?|mins?|hours?|hrs?|days?|weeks?)\b"
    rf"(?:\s+and\s+(?:a\s+)?(?P<n2>{NUMBER_PATTERN}|half)(?:\s+(?P<u2>minutes?|mins?))?\b)?", _F)
_ZH_REL = re.compile(
    rf"(?P<pre>过\s*)?(?P<n>{_ZH_NUM}|半)\s*个?\s*(?P<half>半)?\s*个?\s*(?P<u>分钟|分|小时|钟头|天|周|星期)"
    rf"\s*(?P<post>之后|以后|后)?")

_EN_DAY = re.compile(
    r"\b(?:(?P<dat>(?:the\s+)?day\s+after\s+tomorrow)|(?P<tod>today)|(?P<ton>tonight)|(?P<tom>tomorrow|tmrw)"
    r"|(?P<ths>this)(?=\s+(?:morning|afternoon|evening)\b))\b", _F)
_ZH_DAY = re.compile(r"大后天|后天|明天|明日|今天|今日|明早|明晚|今早|今晚")
_ZH_DAY_OFFSETS = {"今天": (0, None), "今日": (0, None), "今早": (0, "morning"), "今晚": (0, "evening"),
                   "明天": (1, None), "明日": (1, None), "明早": (1, "morning"), "明晚": (1, "evening"),
                   "后天": (2, None), "大后天": (3, None)}
_EN_WEEKDAY = re.compile(rf"\b(?:(?P<q>on|this|next|this\s+coming|coming)\s+)?(?P<wd>{_WD_EN})\b", _F)
_ZH_WEEKDAY_RE = re.compile(r"(?P<q>下个?|这个?|本)?(?:周|星期|礼拜)(?P<wd>[一二三四五六日天])")

_EN_DAYPART = re.compile(r"\b(?:(?:in\s+the|this|at)\s+)?(?P<dp>morning|afternoon|evening|night|noon|midday)\b", _F)
_ZH_DAYPART = re.compile(r"早上|早晨|清晨|上午|中午|下午|傍晚|晚上|夜里|夜间|半夜|凌晨")
_ZH_DAYPART_KIND = {"早上": "morning", "早晨": "morning", "清晨": "morning", "上午": "morning", "中午": "noon",
                    "下午": "afternoon", "傍晚": "evening", "晚上": "evening", "夜里": "night", "夜间": "night",
                    "半夜": "night", "凌晨": "early"}

_EN_CLOCK = re.compile(
    rf"(?P<at>\b(?:at|@)\s*)?(?:\b(?P<hw>{_HOUR_WORDS})\b|(?<![\d:.])(?P<h>\d{{1,2}}))"
    rf"(?:[:.](?P<mm>\d{{2}})\b|\s+(?P<mw>{_MIN_WORDS})\b)?"
    rf"(?:\s*(?:(?P<mer>[ap])\.?\s?m\b\.?|(?P<oclock>o'?\s?clock\b)))?", _F)
_EN_PAST_TO = re.compile(
    rf"(?:\b(?:at)\s+)?\b(?P<q>half|quarter)\s+(?P<rel>past|after|to|till)\s+(?P<h>\d{{1,2}}|{_HOUR_WORDS})\b"
    rf"(?:\s*(?P<mer>[ap])\.?\s?m\b\.?)?", _F)
_A_BIT_BEFORE = set("早晚快慢大小多少好差")
_EN_NOON = re.compile(r"\b(?:at\s+)?(?:noon|midday)\b", _F)
_ZH_CLOCK = re.compile(
    rf"(?P<h>{_ZH_NUM})\s*(?:点钟|点|时)(?![儿点])"
    rf"(?:\s*(?P<half>半)|\s*(?P<q>一刻|三刻)|\s*(?P<m>{_ZH_NUM})\s*分?)?")

_EN_VAGUE = re.compile(
    r"\b(?:later(?:\s+today|\s+on)?|soon|sometime|some\s+time|at\s+some\s+point|one\s+day|someday|eventually"
    r"|whenever|this\s+weekend|next\s+week|in\s+a\s+(?:bit|while|moment|minute|sec|second)"
    r"|in\s+a\s+few\s+\w+|in\s+a\s+couple\s+(?:of\s+)?\w+)\b", _F)
_ZH_VAGUE = re.compile(r"稍后|待会儿?|等会儿?|等一下|一会儿|过一会儿?|晚点|晚一点|迟点|迟一点|改天|有空|回头|过几天|几分钟后"
                       r"|几个小时后|以后|将来|周末|下周(?![一二三四五六日天])|下个?星期(?![一二三四五六日天])")

_EN_UNIT_MINUTES = {"min": 1, "minute": 1, "hr": 60, "hour": 60, "day": 1440, "week": 10080}
_ZH_UNIT_MINUTES = {"分钟": 1, "分": 1, "小时": 60, "钟头": 60, "天": 1440, "周": 10080, "星期": 10080}

Span = tuple[int, int]


def _number(token: str | None) -> int | None:
    if not token:
        return None
    return parse_number(token)


def hour24(hour: int, minute: int, meridiem: str | None, daypart: str | None) -> int | None:
    """Apply am/pm or a part of day to a spoken hour; None when the combination makes no sense."""
    if not (0 <= minute <= 59) or not (0 <= hour <= 24):
        return None
    if hour == 24 and minute == 0 and not meridiem and not daypart:
        return None  # "24点" is tomorrow's midnight: too easy to misread, ask instead
    if meridiem:
        if not 1 <= hour <= 12:
            return None
        if (meridiem == "a" and daypart in ("afternoon", "evening")) or (
                meridiem == "p" and daypart in ("morning", "early")):
            return None  # "7 pm in the morning" contradicts itself
        return hour % 12 + (12 if meridiem == "p" else 0)
    if daypart is None:
        return hour if hour <= 23 else None
    if hour > 12:
        return hour if daypart in ("afternoon", "evening", "night", "noon") else None
    if daypart in ("morning", "early"):
        return None if hour == 12 else hour
    if daypart == "noon":
        return hour if hour in (11, 12) else (hour + 12 if 1 <= hour <= 2 else None)
    if daypart == "afternoon":
        return 12 if hour == 12 else hour + 12
    if daypart == "evening":
        return None if hour in (0, 12) else hour + 12
    # night: small hours are after midnight, the rest are evening hours
    if hour == 12 or hour == 0:
        return None
    return hour if hour <= 4 else hour + 12


@dataclass
class Scan:
    """What the scanners found in one text."""

    spans: list[Span] = field(default_factory=list)
    day_words: list[tuple[int, str]] = field(default_factory=list)  # (position, text) for the question
    day_offset: int | None = None
    date: date | None = None
    weekdays: set[int] = field(default_factory=set)
    week_shift: int | None = None  # 0 = this calendar week, 1 = next; None = nearest upcoming
    daypart: str | None = None
    clock: tuple[int, int, str | None] | None = None  # (hour, minute, meridiem 'a'/'p')
    clock_24h: bool = False  # the hour was written "07": 24-hour notation, never a 12-hour reading
    noon: bool = False
    tonight: bool = False  # "tonight" names its own configured time, later than "this evening"
    duration_min: float | None = None
    vague: bool = False
    conflict: bool = False

    def add(self, match: re.Match, *, day_word: bool = False, text: str | None = None) -> None:
        self.spans.append(match.span())
        if day_word:
            self.day_words.append((match.start(), text if text is not None else match.group(0)))


def scan_text(s: str, today: date) -> Scan:
    scan = Scan()
    amount: float | None
    # -- durations -------------------------------------------------------------------------------
    for m in _EN_REL.finditer(s):
        unit = _EN_UNIT_MINUTES[m.group("u").lower().rstrip("s")]
        n_text = (m.group("n") or "").lower()
        if m.group("half"):
            amount = 0.5
        elif n_text in ("a", "an"):
            if unit < 60:
                continue  # "in a minute" is a figure of speech: vague
            amount = 1
        else:
            value = _number(n_text)
            if value is None:
                continue
            amount = value
        if m.group("n2"):
            if m.group("n2").lower() == "half":
                amount += 0.5  # "in an hour and a half"
            elif m.group("u2") and (extra := _number(m.group("n2"))) is not None:
                amount += extra / unit  # "in 1 hour and 30 minutes"
            else:
                scan.conflict = True  # "in 1 hour and 30": unit unknown
                continue
        _add_duration(scan, m, amount * unit)
    for m in _ZH_REL.finditer(s):
        if not (m.group("pre") or m.group("post")):
            continue
        unit = _ZH_UNIT_MINUTES[m.group("u")]
        amount = 0.5 if m.group("n") == "半" else _number(m.group("n"))
        if amount is None:
            continue
        if m.group("half"):
            amount += 0.5
        _add_duration(scan, m, amount * unit)
    # -- days ------------------------------------------------------------------------------------
    for m in _EN_DAY.finditer(s):
        offset = 2 if m.group("dat") else 1 if m.group("tom") else 0
        if m.group("ton"):
            _set_daypart(scan, "evening")
            scan.tonight = True
        _set_offset(scan, offset)
        scan.add(m, day_word=not m.group("ths"))  # "this" alone; "this morning" is named by the part of day
    for m in _ZH_DAY.finditer(s):
        offset, part = _ZH_DAY_OFFSETS[m.group(0)]
        _set_offset(scan, offset)
        if part:
            _set_daypart(scan, part)
        scan.tonight |= m.group(0) == "今晚"
        scan.add(m, day_word=True)
    for m in _EN_WEEKDAY.finditer(s):
        q = (m.group("q") or "").lower()
        scan.weekdays.add(_EN_WEEKDAYS.index(m.group("wd").lower()))
        _set_week(scan, 1 if q == "next" else 0 if q == "this" else None)
        scan.add(m, day_word=True)
    zh_weekday_spans: list[Span] = []
    for m in _ZH_WEEKDAY_RE.finditer(s):
        zh_weekday_spans.append(m.span())
        q = m.group("q") or ""
        scan.weekdays.add(_ZH_WEEKDAY[m.group("wd")])
        _set_week(scan, 1 if q.startswith("下") else 0 if q else None)
        scan.add(m, day_word=True)
    month: int | None
    for pattern in (_EN_DATE_MD, _EN_DATE_DM):
        for m in pattern.finditer(s):
            month = _MONTHS[m.group("mon").lower()[:3]]
            _set_date(scan, _infer_year(today, month, int(m.group("d"))))
            scan.add(m, day_word=True)
    for m in _ZH_DATE.finditer(s):
        month, day = _number(m.group("mo")), _number(m.group("d"))
        year = int(m.group("y")) if m.group("y") else None
        _set_date(scan, _make_date(year, month, day) if year else _infer_year(today, month, day))
        scan.add(m, day_word=True)
    for m in _ISO_DATE.finditer(s):
        _set_date(scan, _make_date(int(m.group(1)), int(m.group(2)), int(m.group(3))))
        scan.add(m, day_word=True)
    # -- parts of day and clock times ------------------------------------------------------------
    for m in _EN_DAYPART.finditer(s):
        kind = m.group("dp").lower()
        if kind in ("noon", "midday"):
            scan.noon = True
            scan.spans.append(m.span())
            continue
        _set_daypart(scan, kind)
        scan.add(m, day_word=True)
    for m in _ZH_DAYPART.finditer(s):
        _set_daypart(scan, _ZH_DAYPART_KIND[m.group(0)])
        scan.add(m, day_word=True)
    taken: list[Span] = []  # "quarter to 8 pm" must not also be read as "8 pm"
    for m in _EN_PAST_TO.finditer(s):
        hour = _number(m.group("h"))
        if hour is None or not 1 <= hour <= 12:
            scan.conflict = True
            continue
        minutes = 30 if m.group("q").lower() == "half" else 15
        if m.group("rel").lower() in ("to", "till"):
            if minutes == 30 or (hour == 12 and m.group("mer")):
                # "half to seven" is not English; "quarter to 12 pm" crosses am/pm: ask rather than guess
                scan.conflict = True
                continue
            hour, minutes = (hour - 1) or 12, 45
        _set_clock(scan, (hour, minutes, (m.group("mer") or "").lower() or None))
        scan.spans.append(m.span())
        taken.append(m.span())
    for m in _EN_CLOCK.finditer(s):
        if not (m.group("at") or m.group("mm") or m.group("mer") or m.group("oclock")):
            continue
        if any(a < m.end() and m.start() < b for a, b in taken):
            continue
        hour = _number(m.group("hw") or m.group("h"))
        minute = int(m.group("mm")) if m.group("mm") else (_number(m.group("mw").replace("oh", "").strip())
                                                          if m.group("mw") else 0)
        if hour is None or minute is None:
            scan.conflict = True
            continue
        _set_clock(scan, (hour, minute, (m.group("mer") or "").lower() or None))
        scan.clock_24h |= _zero_padded(m.group("h"))
        scan.spans.append(m.span())
    # "周三九点": the 三 belongs to the weekday, not to an hour "三九"
    for m in _ZH_CLOCK.finditer(blank_spans(s, zh_weekday_spans)):
        if m.group("h") == "一" and m.start() > 0 and s[m.start() - 1] in _A_BIT_BEFORE:
            continue  # "晚一点" is "a bit later", not one o'clock
        hour = _number(m.group("h"))
        if m.group("half"):
            minute = 30
        elif m.group("q"):
            minute = 15 if m.group("q") == "一刻" else 45
        else:
            minute = _number(m.group("m")) if m.group("m") else 0
        if hour is None or minute is None:
            scan.conflict = True
            continue
        _set_clock(scan, (hour, minute, None))
        scan.clock_24h |= _zero_padded(m.group("h"))
        scan.spans.append(m.span())
    for m in _EN_NOON.finditer(s):
        scan.noon = True
        scan.spans.append(m.span())
    for pattern in (_EN_VAGUE, _ZH_VAGUE):
        for m in pattern.finditer(s):
            scan.vague = True
            scan.spans.append(m.span())
    return scan


def _add_duration(scan: Scan, m: re.Match, minutes: float) -> None:
    if minutes >= 1440 and minutes % 1440 == 0:  # whole days name a day, not an instant
        _set_offset(scan, int(minutes // 1440))
        scan.add(m, day_word=True)
        return
    if scan.duration_min is not None and scan.duration_min != minutes:
        scan.conflict = True
    scan.duration_min = minutes
    scan.spans.append(m.span())


def _set_offset(scan: Scan, offset: int) -> None:
    if scan.day_offset is not None and scan.day_offset != offset:
        scan.conflict = True
    scan.day_offset = offset


def _set_daypart(scan: Scan, part: str) -> None:
    if scan.daypart is not None and scan.daypart != part:
        scan.conflict = True
    scan.daypart = part


def _set_week(scan: Scan, shift: int | None) -> None:
    if scan.week_shift is not None and shift is not None and scan.week_shift != shift:
        scan.conflict = True
    if shift is not None:
        scan.week_shift = shift


def _set_date(scan: Scan, value: date | None) -> None:
    if value is None or (scan.date is not None and scan.date != value):
        scan.conflict = True
    scan.date = value or scan.date


def _zero_padded(token: str | None) -> bool:
    return token is not None and len(token) == 2 and token.startswith("0")


def _set_clock(scan: Scan, clock: tuple[int, int, str | None]) -> None:
    if scan.clock is not None and scan.clock != clock:
        scan.conflict = True
    scan.clock = clock


def _make_date(year: int, month: int | None, day: int | None) -> date | None:
    try:
        return date(year, month or 0, day or 0)
    except ValueError:
        return None


def _infer_year(today: date, month: int | None, day: int | None) -> date | None:
    """A month/day without a year is the next such date (this year, or next year when already past)."""
    this_year = _make_date(today.year, month, day)
    if this_year is None:
        return None
    return this_year if this_year >= today else _make_date(today.year + 1, month, day)


def day_phrase(s: str, scan: Scan) -> str | None:
    if not scan.day_words:
        return None
    parts = [text.strip() for _, text in sorted(scan.day_words)]
    joiner = "" if has_cjk("".join(parts)) else " "
    return joiner.join(parts)
