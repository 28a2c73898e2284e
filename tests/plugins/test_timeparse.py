"""Relative and explicit times against a fixed request time; vague times are never guessed."""

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from toy_runtime.plugins.repeats import parse_recurrence, parse_reminder_offset
from toy_runtime.plugins.timeparse import parse_iso, parse_when

from .helpers import NY, NY_BEFORE_FALL_BACK, NY_BEFORE_SPRING_FORWARD, SH, SH_NOW


@pytest.mark.parametrize("text, expected", [
    ("in 10 minutes", "2026-11-30T08:10:00+08:00"),
    ("in ten minutes", "2026-11-30T08:10:00+08:00"),
    ("in 2 hours", "2026-11-30T10:00:00+08:00"),
    ("in half an hour", "2026-11-30T08:30:00+08:00"),
    ("in an hour and a half", "2026-11-30T09:30:00+08:00"),
    ("tomorrow at 7 am", "2026-12-01T07:00:00+08:00"),
    ("7 am tomorrow", "2026-12-01T07:00:00+08:00"),
    ("today at 5pm", "2026-11-30T17:00:00+08:00"),
    ("at 7:30 pm", "2026-11-30T19:30:00+08:00"),
    ("at seven thirty pm", "2026-11-30T19:30:00+08:00"),
    ("at half past seven", "2026-11-30T19:30:00+08:00"),  # 12-hour reading: 19:30 is the next half past seven
    ("quarter to 8 pm tomorrow", "2026-12-01T19:45:00+08:00"),
    ("on Monday at 9", "2026-11-30T09:00:00+08:00"),  # a named day reads the hour as written; 9:00 is still ahead
    ("on Wednesday at 9", "2026-12-02T09:00:00+08:00"),
    ("next Monday at 9", "2026-12-07T09:00:00+08:00"),
    ("tonight at 8", "2026-11-30T20:00:00+08:00"),
    ("tomorrow at noon", "2026-12-01T12:00:00+08:00"),
    ("December 1 at 7:30 pm", "2026-12-01T19:30:00+08:00"),
    ("2026-12-01T07:00:00+08:00", "2026-12-01T07:00:00+08:00"),
    ("2026-12-01 07:00", "2026-12-01T07:00:00+08:00"),
    ("明天早上7点", "2026-12-01T07:00:00+08:00"),
    ("今天下午3点", "2026-11-30T15:00:00+08:00"),
    ("10分钟后", "2026-11-30T08:10:00+08:00"),
    ("半小时后", "2026-11-30T08:30:00+08:00"),
    ("两个小时以后", "2026-11-30T10:00:00+08:00"),
    ("明天7点半", "2026-12-01T07:30:00+08:00"),
    ("后天晚上8点", "2026-12-02T20:00:00+08:00"),
    ("下周一早上9点", "2026-12-07T09:00:00+08:00"),
    ("12月1日上午9点", "2026-12-01T09:00:00+08:00"),
    ("明早7点", "2026-12-01T07:00:00+08:00"),
])
def test_precise_times_shanghai(text, expected):
    match = parse_when(text, SH_NOW, SH)
    assert match.when is not None, text
    assert match.when.isoformat() == expected
    assert not match.vague


@pytest.mark.parametrize("text", [
    "tomorrow morning", "later", "soon", "in a minute", "in a few minutes", "tomorrow", "on Monday", "tonight",
    "明天早上", "稍后", "一会儿", "晚一点", "明天中午", "下周",
    "in 10 minutes at 7 pm",  # two answers
    "tomorrow at 7 pm in the morning",  # contradicts itself
    "tomorrow, Monday at 9",  # tomorrow is Tuesday
    "half to seven", "quarter to 12 pm",
])
def test_vague_times_are_not_guessed(text):
    match = parse_when(text, SH_NOW, SH)
    assert match.when is None
    assert match.vague


def test_no_time_at_all_is_neither_found_nor_vague():
    match = parse_when("remind me to brush my teeth", SH_NOW, SH)
    assert match.when is None and not match.vague


def test_day_phrase_feeds_the_question():
    assert parse_when("remind me tomorrow morning", SH_NOW, SH).day_phrase == "tomorrow morning"
    assert parse_when("明天早上提醒我", SH_NOW, SH).day_phrase == "明天早上"


def test_time_alone_rolls_to_tomorrow_when_past():
    assert parse_when("at 7 am", SH_NOW, SH).when.isoformat() == "2026-12-01T07:00:00+08:00"


def test_explicit_past_day_is_returned_for_the_caller_to_reject():
    match = parse_when("today at 7 am", SH_NOW, SH)
    assert match.when < SH_NOW and match.explicit_day


def test_dst_fall_back_keeps_wall_clock_for_day_plus_time():
    when = parse_when("tomorrow at 7 am", NY_BEFORE_FALL_BACK, NY).when
    assert when.isoformat() == "2026-11-01T07:00:00-05:00"  # EST after the change


def test_dst_fall_back_duration_is_elapsed_time():
    just_after_midnight = datetime(2026, 11, 1, 0, 30, tzinfo=ZoneInfo(NY))  # EDT
    when = parse_when("in 2 hours", just_after_midnight, NY).when
    assert when.isoformat() == "2026-11-01T01:30:00-05:00"  # 2 real hours, wall clock moved only 1
    elapsed = when.astimezone(timezone.utc) - just_after_midnight.astimezone(timezone.utc)
    assert elapsed.total_seconds() == 7200


def test_dst_spring_forward():
    assert parse_when("tomorrow at 7 am", NY_BEFORE_SPRING_FORWARD, NY).when.isoformat() == "2026-03-08T07:00:00-04:00"
    # 02:30 does not exist that night; the wall time moves forward by the gap
    assert parse_when("tomorrow at 2:30 am", NY_BEFORE_SPRING_FORWARD, NY).when.isoformat() == \
        "2026-03-08T03:30:00-04:00"


def test_fold_hour_is_compared_in_real_time():
    # 01:40 EDT; "at 1:30 am" later than now in real time exists only as 01:30 EST (the repeated hour) —
    # the first 01:30 (EDT) is already past, so the next occurrence is tomorrow's 01:30
    now = datetime(2026, 11, 1, 1, 40, tzinfo=ZoneInfo(NY))
    when = parse_when("at 1:30 am", now, NY).when
    assert when.astimezone(timezone.utc) > now.astimezone(timezone.utc)


def test_same_words_in_different_zones():
    assert parse_when("tomorrow at 7 am", SH_NOW, NY).when.isoformat() == "2026-11-30T07:00:00-05:00"


def test_weekdays_restrict_a_time_without_day():
    # Monday 08:00 → "at 7" on Mon/Wed is Wednesday
    assert parse_when("at 7", SH_NOW, SH, weekdays={0, 2}).when.isoformat() == "2026-12-02T07:00:00+08:00"


def test_bad_inputs():
    with pytest.raises(ValueError):
        parse_when("at 7", SH_NOW, "Mars/Olympus")
    with pytest.raises(ValueError):
        parse_when("at 7", SH_NOW.replace(tzinfo=None), SH)


def test_parse_iso():
    zone = ZoneInfo(SH)
    assert parse_iso("2026-12-01T07:00:00Z", zone).isoformat() == "2026-12-01T15:00:00+08:00"
    assert parse_iso("2026-12-01T07:00", zone).isoformat() == "2026-12-01T07:00:00+08:00"
    assert parse_iso("tomorrow", zone) is None
    assert parse_iso("2026-13-01T07:00", zone) is None


@pytest.mark.parametrize("text, rule", [
    ("every day at 7", {"frequency": "daily"}),
    ("daily", {"frequency": "daily"}),
    ("每天早上7点", {"frequency": "daily"}),
    ("every weekday", {"frequency": "weekdays"}),
    ("工作日", {"frequency": "weekdays"}),
    ("every Monday and Wednesday", {"frequency": "weekly", "days": ["MO", "WE"]}),
    ("on mondays and fridays", {"frequency": "weekly", "days": ["MO", "FR"]}),
    ("每周一", {"frequency": "weekly", "days": ["MO"]}),
    ("每周一和周三", {"frequency": "weekly", "days": ["MO", "WE"]}),
    ("每周一三五", {"frequency": "weekly", "days": ["MO", "WE", "FR"]}),
    ("every week", {"frequency": "weekly"}),
    ("on Monday", None),
    ("tomorrow at 7", None),
])
def test_recurrence(text, rule):
    assert parse_recurrence(text)[0] == rule


@pytest.mark.parametrize("text, minutes", [
    ("remind me 10 minutes before", 10), ("ten minutes early", 10), ("an hour before", 60),
    ("提前10分钟提醒", 10), ("提前半小时提醒我", 30), ("5分钟前提醒我", 5), ("in 10 minutes", None),
])
def test_reminder_offset(text, minutes):
    assert parse_reminder_offset(text)[0] == minutes


def _at(hour: int, minute: int = 0) -> datetime:
    return SH_NOW.replace(hour=hour, minute=minute)


# The one rule for an hour without am/pm (module docstring; docs/schedules.md): on today or no stated day it is the
# next such hour on the 12-hour clock; on a named later day or in a repeat it is read as written (morning reading).
TWELVE_HOUR = [
    # (said, request time, expected)
    ("at 7", _at(10), "2026-11-30T19:00:00+08:00"),
    ("at 7", _at(6), "2026-11-30T07:00:00+08:00"),
    ("at 9", _at(20), "2026-11-30T21:00:00+08:00"),
    ("at 7", _at(20), "2026-12-01T07:00:00+08:00"),  # both past today: the next is tomorrow morning
    ("at 12", _at(10), "2026-11-30T12:00:00+08:00"),
    ("at 12", _at(13), "2026-12-01T00:00:00+08:00"),
    ("at 7:30", _at(10), "2026-11-30T19:30:00+08:00"),
    ("at seven o'clock", _at(10), "2026-11-30T19:00:00+08:00"),
    ("today at 7", _at(10), "2026-11-30T19:00:00+08:00"),
    ("七点", _at(10), "2026-11-30T19:00:00+08:00"),
    ("7点", _at(6), "2026-11-30T07:00:00+08:00"),
    ("九点", _at(20), "2026-11-30T21:00:00+08:00"),
    ("今天七点半", _at(10), "2026-11-30T19:30:00+08:00"),
    # explicit: am/pm, a part of day, or the 24-hour clock
    ("at 7 am", _at(10), "2026-12-01T07:00:00+08:00"),
    ("at 7 pm", _at(6), "2026-11-30T19:00:00+08:00"),
    ("at 07:00", _at(6, 30), "2026-11-30T07:00:00+08:00"),
    ("at 07:00", _at(10), "2026-12-01T07:00:00+08:00"),
    ("at 19:00", _at(6), "2026-11-30T19:00:00+08:00"),
    ("早上七点", _at(10), "2026-12-01T07:00:00+08:00"),
    ("晚上七点", _at(6), "2026-11-30T19:00:00+08:00"),
    ("下午3点", _at(10), "2026-11-30T15:00:00+08:00"),
    ("十九点", _at(6), "2026-11-30T19:00:00+08:00"),
    # a named later day: the hour as written
    ("tomorrow at 7", _at(10), "2026-12-01T07:00:00+08:00"),
    ("tomorrow at 7", _at(20), "2026-12-01T07:00:00+08:00"),
    ("明天七点", _at(10), "2026-12-01T07:00:00+08:00"),
    ("on Wednesday at 9", _at(10), "2026-12-02T09:00:00+08:00"),
    ("周三九点", _at(10), "2026-12-02T09:00:00+08:00"),
]


@pytest.mark.parametrize("text, now, expected", TWELVE_HOUR)
def test_an_hour_without_am_pm(text, now, expected):
    match = parse_when(text, now, SH)
    assert match.when is not None and not match.vague, text
    assert match.when.isoformat() == expected


def test_today_at_an_hour_both_halves_past_is_reported_past():
    match = parse_when("today at 7", _at(20), SH)
    assert match.when.isoformat() == "2026-11-30T19:00:00+08:00" and match.when < _at(20) and match.explicit_day


def test_a_repeat_reads_the_hour_as_written():
    assert parse_when("at 7", _at(10), SH, repeating=True).when.isoformat() == "2026-12-01T07:00:00+08:00"
