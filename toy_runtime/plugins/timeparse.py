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
- A part of day without an hour ("tomorrow morning", "明天早上", "this afternoon", "tonight", "明晚") is the household's
  time for it when the caller passes `dayparts` (`[calendar] morning = "08:00"`, afternoon, evening, tonight;
  早上/上午 → morning, 下午 → afternoon, 晚上/明晚 → evening, 今晚 → tonight, 中午 → noon): "tomorrow morning" → 08:00 tomorrow,
  "in the morning" → the next 08:00. Night, 凌晨 and 夜里 have no such time. An hour said with the part of day keeps
  the rules above ("tomorrow morning at 7" → 07:00).
- A day without an hour ("tomorrow", "on Monday"), a part of day without `dayparts`, or words like "later", "soon",
  "稍后", "一会儿" give `vague=True` and no time.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Collection, Mapping
from zoneinfo import ZoneInfo

from .timescan import ISO_DATETIME, Scan, Span, day_phrase, hour24, scan_text

UTC = timezone.utc
WEEKDAY_CODES = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")  # index == date.weekday()
# The household's times for a part of day said without an hour ([calendar] morning, afternoon, evening, tonight)
DayParts = Mapping[str, tuple[int, int]]
DEFAULT_DAYPARTS: DayParts = {"morning": (8, 0), "afternoon": (15, 0), "evening": (18, 0), "tonight": (20, 0)}

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


def parse_when(text: str, now: datetime, tz: str, *, weekdays: Collection[int] | None = None,
               repeating: bool = False, dayparts: DayParts | None = None) -> TimeMatch:
    """Read one time from `text` against the captured `now` (aware) in IANA zone `tz`.

    `weekdays` (0 = Monday) restricts a time given without a day, e.g. the days of a recurrence rule.
    `repeating` says the time belongs to a repeat rule ("every day at 7"), whose hour is read as written.
    `dayparts` ({"morning": (8, 0), …}) gives a part of day said without an hour its time; None keeps it vague.
    Raises ValueError for an unknown zone or a naive `now`.
    """
    if now.tzinfo is None:
        raise ValueError("parse_when needs an aware request time")
    zone = zone_of(tz)
    s = normalize_text(text)
    local_now = now.astimezone(zone)
    today = local_now.date()

    iso = ISO_DATETIME.search(s)
    if iso is not None:
        when = parse_iso(iso.group(0), zone)
        if when is not None:
            return TimeMatch(when=when, spans=(iso.span(),), explicit_day=True)

    scan = scan_text(s, today)
    spans = tuple(sorted(scan.spans))
    phrase = day_phrase(s, scan)
    explicit_day = scan.day_offset is not None or scan.date is not None or bool(scan.weekdays)
    vague = TimeMatch(vague=True, day_phrase=phrase, spans=spans, explicit_day=explicit_day)

    if scan.conflict:
        return vague
    if scan.duration_min is not None:
        if scan.clock or scan.noon or explicit_day:
            return vague  # "in 2 hours at 7 pm": two different answers
        when = (now.astimezone(UTC) + timedelta(minutes=scan.duration_min)).astimezone(zone)
        return TimeMatch(when=when.replace(microsecond=0), spans=spans)

    hour: int | None
    if scan.clock is not None:
        hour, minute, meridiem = scan.clock
        hour = hour24(hour, minute, meridiem, scan.daypart)
    elif scan.noon and scan.daypart is None:
        hour, minute = 12, 0
    elif dayparts and (fixed := _daypart_time(scan, dayparts)) is not None:
        hour, minute = fixed
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


def _daypart_time(scan: Scan, dayparts: DayParts) -> tuple[int, int] | None:
    """The household's time for a part of day said without an hour, or None (no part of day, or a vague word)."""
    if scan.vague or scan.clock is not None or scan.daypart is None:
        return None
    if scan.daypart == "noon":
        return 12, 0  # 中午: noon is a time, like "at noon"
    return dayparts.get("tonight" if scan.tonight else scan.daypart)


def _half_day_open(scan: Scan, today: date, repeating: bool) -> bool:
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


def _next_of_two(scan: Scan, hour: int, minute: int, local_now: datetime, zone: ZoneInfo,
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


def _place(scan: Scan, hour: int, minute: int, local_now: datetime, zone: ZoneInfo,
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
