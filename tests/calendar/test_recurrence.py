"""Recurrence math: one-off, daily, weekly on days, weekdays, reminder offsets, DST wall-clock stability."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from itertools import islice
from zoneinfo import ZoneInfo

import pytest

from toy_runtime.scheduling.recurrence import (
    RecurrenceError,
    latest_due,
    next_occurrence,
    normalize_recurrence,
    occurrences,
    reminder_time,
)

UTC = timezone.utc
NY = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


def take(n, it):
    return list(islice(it, n))


def test_daily_keeps_wall_clock_across_new_york_fall_back():
    start = datetime(2026, 10, 30, 7, 0, tzinfo=NY)
    occ = take(4, occurrences(start, "America/New_York", {"frequency": "daily"}))
    wall = [o.astimezone(NY).strftime("%m-%d %H:%M") for o in occ]
    assert wall == ["10-30 07:00", "10-31 07:00", "11-01 07:00", "11-02 07:00"]
    # The UTC instant moves by one hour when EDT (-4) becomes EST (-5) on 2026-11-01.
    assert occ[1].astimezone(UTC) == datetime(2026, 10, 31, 11, 0, tzinfo=UTC)
    assert occ[2].astimezone(UTC) == datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    assert occ[2].astimezone(UTC) - occ[1].astimezone(UTC) == timedelta(hours=25)


def test_daily_keeps_wall_clock_across_berlin_fall_back():
    start = datetime(2026, 10, 24, 7, 0, tzinfo=BERLIN)
    occ = take(2, occurrences(start, "Europe/Berlin", {"frequency": "daily"}))
    assert occ[0].astimezone(UTC) == datetime(2026, 10, 24, 5, 0, tzinfo=UTC)  # CEST, +2
    assert occ[1].astimezone(UTC) == datetime(2026, 10, 25, 6, 0, tzinfo=UTC)  # CET, +1
    assert all(o.astimezone(BERLIN).hour == 7 for o in occ)


def test_start_given_in_utc_is_interpreted_in_the_entry_zone():
    # 07:00 Berlin summer time expressed in UTC: the wall time kept is 07:00 Berlin, not 05:00.
    start = datetime(2026, 10, 24, 5, 0, tzinfo=UTC)
    occ = take(2, occurrences(start, "Europe/Berlin", {"frequency": "daily"}))
    assert [o.astimezone(BERLIN).hour for o in occ] == [7, 7]


def test_skipped_wall_time_on_spring_forward_moves_forward():
    start = datetime(2026, 3, 7, 2, 30, tzinfo=NY)
    occ = take(3, occurrences(start, "America/New_York", {"frequency": "daily"}))
    assert occ[1].astimezone(UTC) == datetime(2026, 3, 8, 7, 30, tzinfo=UTC)  # 02:30 does not exist; 03:30 EDT
    assert occ[1].astimezone(NY).strftime("%H:%M") == "03:30"
    assert occ[2].astimezone(NY).strftime("%H:%M") == "02:30"


def test_ambiguous_wall_time_on_fall_back_happens_once():
    start = datetime(2026, 10, 31, 1, 30, tzinfo=NY)
    occ = take(3, occurrences(start, "America/New_York", {"frequency": "daily"}))
    nov1 = [o for o in occ if o.astimezone(NY).date() == date(2026, 11, 1)]
    assert len(nov1) == 1
    assert nov1[0].astimezone(UTC) == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # first 01:30 (EDT)


def test_weekly_on_given_days():
    start = datetime(2026, 6, 2, 8, 0, tzinfo=BERLIN)  # a Tuesday: not itself an occurrence
    occ = take(4, occurrences(start, "Europe/Berlin", {"frequency": "weekly", "days": ["MO", "WE"]}))
    assert [o.strftime("%a %d") for o in occ] == ["Wed 03", "Mon 08", "Wed 10", "Mon 15"]


def test_weekly_without_days_uses_start_weekday():
    start = datetime(2026, 6, 4, 8, 0, tzinfo=BERLIN)  # Thursday
    occ = take(3, occurrences(start, "Europe/Berlin", {"frequency": "weekly"}))
    assert [o.day for o in occ] == [4, 11, 18]


def test_weekdays_skip_weekend():
    start = datetime(2026, 6, 5, 7, 0, tzinfo=NY)  # Friday
    occ = take(3, occurrences(start, "America/New_York", {"frequency": "weekdays"}))
    assert [o.strftime("%a") for o in occ] == ["Fri", "Mon", "Tue"]


def test_one_off_yields_start_only():
    start = datetime(2026, 6, 5, 7, 0, tzinfo=NY)
    assert list(occurrences(start, "America/New_York", None)) == [start]
    assert next_occurrence(start, "America/New_York", None, start) is None
    assert next_occurrence(start, "America/New_York", None, start - timedelta(seconds=1)) == start


def test_reminder_minutes_shift_earlier_in_real_time():
    occ = datetime(2026, 11, 1, 7, 0, tzinfo=NY)
    assert reminder_time(occ, 15).astimezone(UTC) == datetime(2026, 11, 1, 11, 45, tzinfo=UTC)
    assert reminder_time(occ, 0) == occ
    # Across the fall-back hour: 90 real minutes before 02:00 EST is 01:30 EDT (wall-clock math would say 00:30).
    late = datetime(2026, 11, 1, 2, 0, tzinfo=NY)
    assert reminder_time(late, 90).astimezone(UTC) == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)


def test_next_occurrence_respects_reminder_offset():
    start = datetime(2026, 6, 1, 7, 0, tzinfo=BERLIN)
    rule = {"frequency": "daily"}
    # At 06:55 on June 3 the 07:00 occurrence's 10-minute reminder (06:50) has passed: next is June 4.
    after = datetime(2026, 6, 3, 6, 55, tzinfo=BERLIN)
    nxt = next_occurrence(start, "Europe/Berlin", rule, after, reminder_minutes=10)
    assert nxt == datetime(2026, 6, 4, 7, 0, tzinfo=BERLIN)
    assert next_occurrence(start, "Europe/Berlin", rule, after) == datetime(2026, 6, 3, 7, 0, tzinfo=BERLIN)


def test_latest_due_picks_the_newest_after_downtime():
    start = datetime(2026, 6, 1, 7, 0, tzinfo=BERLIN)
    until = datetime(2026, 6, 10, 12, 0, tzinfo=BERLIN)
    rule = {"frequency": "daily"}
    assert latest_due(start, "Europe/Berlin", rule, until) == datetime(2026, 6, 10, 7, 0, tzinfo=BERLIN)
    last = datetime(2026, 6, 10, 7, 0, tzinfo=BERLIN)
    assert latest_due(start, "Europe/Berlin", rule, until, after_occurrence=last) is None
    assert latest_due(start, "Europe/Berlin", rule, start - timedelta(minutes=1)) is None


def test_normalize_recurrence():
    assert normalize_recurrence(None) is None
    assert normalize_recurrence({"frequency": "once"}) is None
    assert normalize_recurrence({"frequency": "Daily"}) == {"frequency": "daily"}
    assert normalize_recurrence({"frequency": "weekly", "days": ["we", "MO", "monday"]}) == {
        "frequency": "weekly",
        "days": ["MO", "WE"],
    }
    with pytest.raises(RecurrenceError):
        normalize_recurrence({"frequency": "hourly"})
    with pytest.raises(RecurrenceError):
        normalize_recurrence({"frequency": "weekly", "days": ["XX"]})
    with pytest.raises(RecurrenceError):
        list(occurrences(datetime(2026, 1, 1, 7, 0, tzinfo=UTC), "Mars/Olympus", None))
