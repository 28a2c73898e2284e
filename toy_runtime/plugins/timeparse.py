"""Simple, unambiguous times in English and Chinese, resolved against a captured request time and an IANA zone.

What is understood (everything else is "no time" or "vague", and vague times are never guessed):

- ISO/RFC3339 values ("2026-12-01T07:00:00+08:00"; naive ones get the session zone);
- relative durations: "in 10 minutes", "in 2 hours", "in half an hour", "10分钟后", "半小时后", "过两个小时";
- a day + a clock time: "tomorrow at 7 am", "today at 5pm", "on Monday at 9", "明天早上7点", "今天下午3点",
  "明天7点半", "后天晚上8点", "December 1 at 7:30 pm", "12月1日上午9点";
- "half past seven", "quarter to 8 pm";
- a clock time alone ("at 7:30 pm", "7点"), which means its next occurrence (today if still ahead, else tomorrow).

Reading rules (documented so nothing is a silent guess):

- An hour 1-12 without am/pm or a part-of-day word, on today or on no stated day, has a 12-hour reading: it is the
  next such hour, whichever of h:mm and (h+12):mm comes first after the request time ("at 7" said at 10:00 → 19:00
  today; at 06:00 → 07:00 today; "at 9" at 20:00 → 21:00 today; "七点" follows the same rule). One rule, never a
  question: a child who says "at 7" at breakfast means tonight, and the spoken confirmation names AM/PM.
  "today at 7" said after 19:00 is past (the caller says so and asks again).
- The same hour on a named later day ("tomorrow at 7", "on Wednesday at 9", "明天7点半") or in a repeat ("every day
  at 7") is read as written, the morning reading: 7 → 07:00, 12 → noon. Wake-ups and school mornings are what such
  requests are mostly about; the confirmation says "7:00 AM" so a wrong guess is heard and can be corrected.
- Hours written on the 24-hour clock ("at 19:00", "at 07:30", "十九点", "0点") are taken as written.
  "am/pm", "morning/afternoon/evening/tonight" and 早上/上午/中午/下午/晚上/凌晨 make any hour explicit.
- "on Monday"/"周一" is the nearest Monday whose time is still ahead (today counts);
  "next Monday"/"下周一" is the Monday of next calendar week (weeks start on Monday); "this Friday"/"这周五" is the
  Friday of this week, even if already past (the caller then reports a past time).
- Durations are elapsed time ("in 2 hours" across a DST change is 2 real hours); day + clock keeps the wall clock.
- Wall times skipped by a DST change (02:30 on spring-forward day) move forward by the gap.
- A day or part of day without an hour ("tomorrow morning", "明天早上"), or words like "later", "soon", "稍后",
  "一会儿" give `vague=True` and no time.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Collection
from zoneinfo import ZoneInfo

from .numbers import NUMBER_PATTERN, ZH_NUMERAL_CHARS, parse_number
from ..language import has_cjk
from .text import blank_spans

UTC = timezone.utc
WEEKDAY_CODES = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")  # index == date.weekday()

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

_ISO_DATETIME = re.compile(
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


@dataclass(frozen=True)
class TimeMatch:
    """The outcome of reading a time from text.

    `when` is an aware datetime in the requested zone, or None. `vague` is True when the text talks about a time
    but not precisely enough to act on. `day_phrase` names the stated day/part of day ("tomorrow morning", "明天早上")
    for a focused question. `spans` are the [start, end) ranges of `normalize_text(text)` that were time words.
    `explicit_day` says a day was stated (so a past result means the user named a past time).
    """

    when: datetime | None = None
    vague: bool = False
    day_phrase: str | None = None
    spans: tuple[Span, ...] = ()
    explicit_day: bool = False

    @property
    def found(self) -> bool:
        """True when a precise time was read."""
        return self.when is not None


def normalize_text(text: str) -> str:
    """NFKC (full-width digits and colons become ASCII); case is kept so titles keep theirs."""
    return unicodedata.normalize("NFKC", text or "")


def zone_of(name: str) -> ZoneInfo:
    """The IANA zone `name`; raises ValueError for an unknown or malformed name."""
    try:
        return ZoneInfo(name)
    except Exception as exc:  # ZoneInfoNotFoundError, ValueError for paths, TypeError for junk
        raise ValueError(f"unknown time zone {name!r}") from exc


def localize(day: date, hour: int, minute: int, zone: ZoneInfo) -> datetime:
    """The aware datetime for a wall-clock time on `day` in `zone` (DST-gap times move forward)."""
    naive_local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
    # a round trip through UTC moves wall times that fall in a DST gap forward by the gap
    return naive_local.astimezone(UTC).astimezone(zone)


def is_after(a: datetime, b: datetime) -> bool:
    """a > b in real time. Python compares same-zone datetimes by wall clock, which is wrong across a DST fold."""
    return a.astimezone(UTC) > b.astimezone(UTC)


def parse_iso(value: str, zone: ZoneInfo) -> datetime | None:
    """An ISO/RFC3339 date-time → aware datetime in `zone` (naive values are read in `zone`); None if not ISO."""
    text = normalize_text(value).strip()
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:[Zz]|[+-]\d{2}:?\d{2})?", text):
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return localize(parsed.date(), parsed.hour, parsed.minute, zone).replace(
            second=parsed.second, microsecond=parsed.microsecond)
    return parsed.astimezone(zone)


def rfc3339(value: datetime) -> str:
    """RFC3339 text with an explicit offset and whole seconds: 2026-12-01T07:00:00+08:00."""
    return value.isoformat(timespec="seconds")


def _number(token: str | None) -> int | None:
    if not token:
        return None
    return parse_number(token)


def _hour24(hour: int, minute: int, meridiem: str | None, daypart: str | None) -> int | None:
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
class _Scan:
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
    duration_min: float | None = None
    vague: bool = False
    conflict: bool = False

    def add(self, match: re.Match, *, day_word: bool = False, text: str | None = None) -> None:
        self.spans.append(match.span())
        if day_word:
            self.day_words.append((match.start(), text if text is not None else match.group(0)))


def _scan(s: str, today: date) -> _Scan:
    scan = _Scan()
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
        _set_offset(scan, offset)
        scan.add(m, day_word=not m.group("ths"))  # "this" alone; "this morning" is named by the part of day
    for m in _ZH_DAY.finditer(s):
        offset, part = _ZH_DAY_OFFSETS[m.group(0)]
        _set_offset(scan, offset)
        if part:
            _set_daypart(scan, part)
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


def _add_duration(scan: _Scan, m: re.Match, minutes: float) -> None:
    if minutes >= 1440 and minutes % 1440 == 0:  # whole days name a day, not an instant
        _set_offset(scan, int(minutes // 1440))
        scan.add(m, day_word=True)
        return
    if scan.duration_min is not None and scan.duration_min != minutes:
        scan.conflict = True
    scan.duration_min = minutes
    scan.spans.append(m.span())


def _set_offset(scan: _Scan, offset: int) -> None:
    if scan.day_offset is not None and scan.day_offset != offset:
        scan.conflict = True
    scan.day_offset = offset


def _set_daypart(scan: _Scan, part: str) -> None:
    if scan.daypart is not None and scan.daypart != part:
        scan.conflict = True
    scan.daypart = part


def _set_week(scan: _Scan, shift: int | None) -> None:
    if scan.week_shift is not None and shift is not None and scan.week_shift != shift:
        scan.conflict = True
    if shift is not None:
        scan.week_shift = shift


def _set_date(scan: _Scan, value: date | None) -> None:
    if value is None or (scan.date is not None and scan.date != value):
        scan.conflict = True
    scan.date = value or scan.date


def _zero_padded(token: str | None) -> bool:
    return bool(token) and len(token) == 2 and token.startswith("0")


def _set_clock(scan: _Scan, clock: tuple[int, int, str | None]) -> None:
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


def _day_phrase(s: str, scan: _Scan) -> str | None:
    if not scan.day_words:
        return None
    parts = [text.strip() for _, text in sorted(scan.day_words)]
    joiner = "" if has_cjk("".join(parts)) else " "
    return joiner.join(parts)


def parse_when(text: str, now: datetime, tz: str, *, weekdays: Collection[int] | None = None,
               repeating: bool = False) -> TimeMatch:
    """Read one time from `text` against the captured `now` (aware) in IANA zone `tz`.

    `weekdays` (0 = Monday) restricts a time given without a day, e.g. the days of a recurrence rule.
    `repeating` says the time belongs to a repeat rule ("every day at 7"), whose hour is read as written.
    Raises ValueError for an unknown zone or a naive `now`.
    """
    if now.tzinfo is None:
        raise ValueError("parse_when needs an aware request time")
    zone = zone_of(tz)
    s = normalize_text(text)
    local_now = now.astimezone(zone)
    today = local_now.date()

    iso = _ISO_DATETIME.search(s)
    if iso is not None:
        when = parse_iso(iso.group(0), zone)
        if when is not None:
            return TimeMatch(when=when, spans=(iso.span(),), explicit_day=True)

    scan = _scan(s, today)
    spans = tuple(sorted(scan.spans))
    phrase = _day_phrase(s, scan)
    explicit_day = scan.day_offset is not None or scan.date is not None or bool(scan.weekdays)
    vague = TimeMatch(vague=True, day_phrase=phrase, spans=spans, explicit_day=explicit_day)

    if scan.conflict:
        return vague
    if scan.duration_min is not None:
        if scan.clock or scan.noon or explicit_day:
            return vague  # "in 2 hours at 7 pm": two different answers
        when = (now.astimezone(UTC) + timedelta(minutes=scan.duration_min)).astimezone(zone)
        return TimeMatch(when=when.replace(microsecond=0), spans=spans)

    if scan.clock is not None:
        hour, minute, meridiem = scan.clock
        hour = _hour24(hour, minute, meridiem, scan.daypart)
    elif scan.noon and scan.daypart is None:
        hour, minute = 12, 0
    else:
        hour = None
    if hour is None:
        if scan.vague or explicit_day or scan.daypart or scan.clock or scan.noon:
            return vague
        return TimeMatch(spans=spans)

    if _half_day_open(scan, today, repeating or bool(weekdays)):
        when = _next_of_two(scan, hour % 12, minute, local_now, zone, weekdays)
    else:
        when = _place(scan, hour, minute, local_now, zone, weekdays)
    if when is None:
        return vague
    return TimeMatch(when=when, day_phrase=phrase, spans=spans, explicit_day=explicit_day)


def _half_day_open(scan: _Scan, today: date, repeating: bool) -> bool:
    """True when an hour could be either half of the day and lands on today or the next day said nowhere.

    "at 7", "7点", "today at 7", "half past seven": no am/pm, no part of day, an hour 1-12 not written "07".
    A named later day ("tomorrow at 7", "on Monday at 9", "明天7点") and a repeat ("every day at 7") read the hour
    as written instead (the morning reading: 7 → 07:00, 12 → noon).
    """
    if scan.clock is None or scan.clock_24h or scan.daypart is not None or scan.noon:
        return False
    hour, _, meridiem = scan.clock
    if meridiem is not None or not 1 <= hour <= 12 or repeating or scan.weekdays:
        return False
    if scan.date is not None:
        return scan.date == today and scan.day_offset in (None, 0)
    return scan.day_offset in (None, 0)


def _next_of_two(scan: _Scan, hour: int, minute: int, local_now: datetime, zone: ZoneInfo,
                 weekdays: Collection[int] | None) -> datetime | None:
    """The 12-hour reading: whichever of hour:minute and (hour + 12):minute comes next after now.

    When both are already past on a stated "today", the later one is returned so the caller reports a past time.
    """
    candidates = [c for c in (_place(scan, h, minute, local_now, zone, weekdays) for h in (hour, hour + 12)) if c]
    if not candidates:
        return None
    ahead = [c for c in candidates if is_after(c, local_now)]
    if ahead:
        return min(ahead, key=lambda c: c.astimezone(UTC))
    return max(candidates, key=lambda c: c.astimezone(UTC))


def _place(scan: _Scan, hour: int, minute: int, local_now: datetime, zone: ZoneInfo,
           weekdays: Collection[int] | None) -> datetime | None:
    """Put a wall-clock time on a day, following the module's reading rules."""
    today = local_now.date()
    if scan.date is not None:
        if scan.day_offset is not None and today + timedelta(days=scan.day_offset) != scan.date:
            return None
        if scan.weekdays and scan.date.weekday() not in scan.weekdays:
            return None
        return localize(scan.date, hour, minute, zone)
    if scan.day_offset is not None:
        day = today + timedelta(days=scan.day_offset)
        if scan.weekdays and day.weekday() not in scan.weekdays:
            return None  # "tomorrow, Monday" when tomorrow is not Monday
        return localize(day, hour, minute, zone)
    if scan.weekdays and scan.week_shift is not None:
        if len(scan.weekdays) != 1:
            return None
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=scan.week_shift)
        return localize(monday + timedelta(days=next(iter(scan.weekdays))), hour, minute, zone)
    allowed = scan.weekdays or set(weekdays or ()) or set(range(7))
    for ahead in range(0, 8):
        day = today + timedelta(days=ahead)
        if day.weekday() not in allowed:
            continue
        candidate = localize(day, hour, minute, zone)
        if is_after(candidate, local_now):
            return candidate
    return None
