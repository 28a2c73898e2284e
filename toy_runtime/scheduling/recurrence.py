"""Occurrence math for schedules: one-off, daily, weekly on given days, weekdays — in the entry's IANA zone.

Occurrences keep the *wall-clock* time of `start_at` in the entry's zone, so a 07:00 reminder stays at 07:00 local
across a DST change (the UTC instant moves by an hour). Wall times that do not exist on a spring-forward day
(02:30 in a skipped hour) resolve with fold=0, i.e. one hour later in local terms; ambiguous times on a fall-back day
take the first (pre-transition) instant, so they fire once.

Pure functions over aware datetimes; no clock, no I/O. `due_occurrences` and `next_reminder_at` apply them to
stored entries, so every `ReminderStore` (the SQLite adapter, the in-memory fake) answers by the same rule.
"""

from __future__ import annotations

import logging
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, Iterable, Iterator, Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import ToyError
from ..ports.calendar import DueOccurrence, ScheduleEntry

log = logging.getLogger(__name__)

FREQUENCIES = ("daily", "weekly", "weekdays")
DAY_CODES = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")  # index == date.weekday()

UTC = timezone.utc


class RecurrenceError(ToyError, ValueError):
    """A recurrence rule or zone that cannot be used."""

    code = "invalid_recurrence"


def zone(name: str) -> ZoneInfo:
    """The IANA zone `name`, or RecurrenceError."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise RecurrenceError(f"unknown IANA time zone {name!r}") from exc


def normalize_recurrence(recurrence: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Validate a rule and return its canonical form ({"frequency": ..., "days": [...]} for weekly), None for one-off.

    weekly without days means "the weekday of start_at" and is kept as {"frequency": "weekly", "days": []}.
    """
    if not recurrence:
        return None
    frequency = str(recurrence.get("frequency", "")).strip().lower()
    if frequency in ("", "none", "once"):
        return None
    if frequency not in FREQUENCIES:
        raise RecurrenceError(f"unknown recurrence frequency {frequency!r}; expected one of {', '.join(FREQUENCIES)}")
    if frequency != "weekly":
        return {"frequency": frequency}
    raw_days = recurrence.get("days") or []
    if isinstance(raw_days, str):
        raw_days = [raw_days]
    days: set[str] = set()
    for day in raw_days:
        code = str(day).strip().upper()[:2]
        if code not in DAY_CODES:
            raise RecurrenceError(f"unknown weekday {day!r}; expected codes like MO, WE")
        days.add(code)
    return {"frequency": "weekly", "days": [d for d in DAY_CODES if d in days]}


def _matches(day: date, recurrence: Mapping[str, Any] | None, start_day: date) -> bool:
    if recurrence is None:
        return day == start_day
    frequency = recurrence["frequency"]
    if frequency == "daily":
        return True
    if frequency == "weekdays":
        return day.weekday() < 5
    days = recurrence.get("days") or [DAY_CODES[start_day.weekday()]]
    return DAY_CODES[day.weekday()] in days


def _at_wall_time(day: date, wall: time, tz: ZoneInfo) -> datetime:
    # fold=0: a skipped wall time maps forward, an ambiguous one to its first instant (see module docstring).
    return datetime.combine(day, wall, tzinfo=tz).astimezone(UTC).astimezone(tz)


def occurrences(
    start_at: datetime,
    timezone_name: str,
    recurrence: Mapping[str, Any] | None,
    *,
    from_day: date | None = None,
) -> Iterator[datetime]:
    """Occurrence start instants (aware, in the entry's zone), ascending, beginning with the local day `from_day`.

    One-off rules yield `start_at` only. Recurring rules are unbounded: the caller stops iterating.
    """
    if start_at.tzinfo is None:
        raise RecurrenceError("start_at must be timezone-aware")
    tz = zone(timezone_name)
    rule = normalize_recurrence(recurrence)
    local = start_at.astimezone(tz)
    if rule is None:
        yield local
        return
    start_day, wall = local.date(), local.time().replace(tzinfo=None)
    day = max(start_day, from_day) if from_day else start_day
    while True:
        if _matches(day, rule, start_day):
            yield _at_wall_time(day, wall, tz)
        day += timedelta(days=1)


def _utc(when: datetime) -> datetime:
    # Python compares and subtracts datetimes sharing one tzinfo by wall clock, ignoring DST; UTC is always exact.
    return when.astimezone(UTC)


def reminder_time(occurrence_at: datetime, reminder_minutes: int) -> datetime:
    """When to remind for an occurrence: `reminder_minutes` real (not wall-clock) minutes before it, same zone."""
    return (_utc(occurrence_at) - timedelta(minutes=max(0, reminder_minutes))).astimezone(occurrence_at.tzinfo)


def next_occurrence(
    start_at: datetime,
    timezone_name: str,
    recurrence: Mapping[str, Any] | None,
    after: datetime,
    *,
    reminder_minutes: int = 0,
) -> datetime | None:
    """The first occurrence whose reminder time is strictly after `after`, or None (a one-off already past)."""
    tz = zone(timezone_name)
    # Start a couple of days early: the reminder offset and zone offsets can move an occurrence across a date line.
    from_day = (after.astimezone(tz) + timedelta(minutes=max(0, reminder_minutes))).date() - timedelta(days=2)
    for occ in occurrences(start_at, timezone_name, recurrence, from_day=from_day):
        if _utc(reminder_time(occ, reminder_minutes)) > _utc(after):
            return occ
    return None


def latest_due(
    start_at: datetime,
    timezone_name: str,
    recurrence: Mapping[str, Any] | None,
    until: datetime,
    *,
    reminder_minutes: int = 0,
    after_occurrence: datetime | None = None,
) -> datetime | None:
    """The latest occurrence whose reminder time is at or before `until` and which starts after `after_occurrence`.

    This is what the scheduler handles: after downtime, earlier unhandled occurrences of a recurring entry are
    superseded by the latest one.
    """
    tz = zone(timezone_name)
    # Any rule repeats within 7 days, so the latest due occurrence lies in the last 8 local days before the bound.
    from_day = (until.astimezone(tz) + timedelta(minutes=max(0, reminder_minutes))).date() - timedelta(days=8)
    if after_occurrence is not None:
        from_day = max(from_day, after_occurrence.astimezone(tz).date() - timedelta(days=1))
    latest: datetime | None = None
    for occ in occurrences(start_at, timezone_name, recurrence, from_day=from_day):
        if _utc(reminder_time(occ, reminder_minutes)) > _utc(until):
            break
        if after_occurrence is None or _utc(occ) > _utc(after_occurrence):
            latest = occ
    return latest


def due_occurrences(entries: Iterable[tuple[ScheduleEntry, datetime | None]], until: datetime) -> list[DueOccurrence]:
    """Per (active entry, its latest recorded occurrence or None), the latest occurrence due by `until` that is newer
    than the recorded one, ordered by reminder time. An entry whose rule or zone cannot be used is skipped (logged)."""
    due: list[DueOccurrence] = []
    for entry, last_fired in entries:
        try:
            occ = latest_due(
                entry.start_at,
                entry.timezone,
                entry.recurrence,
                until,
                reminder_minutes=entry.reminder_minutes,
                after_occurrence=last_fired,
            )
        except RecurrenceError as exc:
            log.warning("schedule %s skipped: %s", entry.id, exc)
            continue
        if occ is not None:
            due.append(DueOccurrence(entry, occ, reminder_time(occ, entry.reminder_minutes)))
    due.sort(key=lambda d: _utc(d.remind_at))
    return due


def next_reminder_at(entries: Iterable[ScheduleEntry], after: datetime) -> datetime | None:
    """The earliest reminder time (UTC) strictly after `after` over `entries`, or None."""
    best: datetime | None = None
    for entry in entries:
        try:
            occ = next_occurrence(
                entry.start_at, entry.timezone, entry.recurrence, after, reminder_minutes=entry.reminder_minutes
            )
        except RecurrenceError:
            continue
        if occ is not None:
            at = _utc(reminder_time(occ, entry.reminder_minutes))
            best = at if best is None or at < best else best
    return best
