"""A part of day said without an hour ("tomorrow morning", "明天早上") is the household's time for it
(`[calendar] morning = "08:00"`, afternoon, evening, tonight), said back in the confirmation, not a "what time?"
question. An hour said with it, or an hour alone, keeps the rules of timeparse.py. SH_NOW is Monday 08:00."""

from __future__ import annotations

import pytest

from toy_runtime.app.runtime import offline_registry
from toy_runtime.config import load_settings
from toy_runtime.events import EventKernel, EventStatus
from toy_runtime.plugins.calendar_schedule import NAME
from toy_runtime.plugins.timeparse import DEFAULT_DAYPARTS

from .helpers import request, resolve, run


@pytest.mark.parametrize("utterance, start", [
    ("remind me to brush my teeth tomorrow morning", "2026-12-01T08:00:00+08:00"),
    ("明天早上提醒我刷牙", "2026-12-01T08:00:00+08:00"),
    ("明天上午提醒我去公园", "2026-12-01T08:00:00+08:00"),
    ("remind me this afternoon to walk the dog", "2026-11-30T15:00:00+08:00"),
    ("明天下午提醒我浇花", "2026-12-01T15:00:00+08:00"),
    ("remind me this evening to call Grandma", "2026-11-30T18:00:00+08:00"),
    ("明天晚上提醒我洗澡", "2026-12-01T18:00:00+08:00"),
    ("remind me tonight to read a book", "2026-11-30T20:00:00+08:00"),
    ("今晚提醒我读书", "2026-11-30T20:00:00+08:00"),
    ("remind me in the morning to feed the fish", "2026-12-01T08:00:00+08:00"),  # 08:00 today is not ahead
    ("remind me on Wednesday afternoon to pack my bag", "2026-12-02T15:00:00+08:00"),
])
def test_a_part_of_day_is_the_households_time(registry, utterance, start):
    out = resolve(registry, NAME, utterance)
    assert out.outcome == "resolved", out
    assert out.arguments["start_at"] == start


@pytest.mark.parametrize("utterance, start", [
    ("remind me to brush my teeth tomorrow morning at 7", "2026-12-01T07:00:00+08:00"),  # the hour said wins
    ("明天晚上8点提醒我洗澡", "2026-12-01T20:00:00+08:00"),
    ("remind me at 7 to feed the cat", "2026-11-30T19:00:00+08:00"),  # an hour alone: the next 7 o'clock
])
def test_an_hour_keeps_its_rules(registry, utterance, start):
    assert resolve(registry, NAME, utterance).arguments["start_at"] == start


@pytest.mark.parametrize("utterance", ["remind me to brush my teeth tomorrow night", "明天凌晨提醒我刷牙",
                                       "remind me to call grandma later today"])
def test_parts_without_a_household_time_still_ask(registry, utterance):
    out = resolve(registry, NAME, utterance)
    assert out.outcome == "incomplete" and out.missing == ("start_at",) and out.question


def test_the_configured_times_are_used(tmp_path):
    settings = load_settings(env={"TOY_STATE_DIR": str(tmp_path), "TOY_CALENDAR__MORNING": "07:30",
                                  "TOY_CALENDAR__TONIGHT": "19:45"})
    registry = offline_registry(settings)
    assert resolve(registry, NAME, "remind me tomorrow morning to brush my teeth").arguments["start_at"] == \
        "2026-12-01T07:30:00+08:00"
    assert resolve(registry, NAME, "今晚提醒我洗澡").arguments["start_at"] == "2026-11-30T19:45:00+08:00"


def test_the_config_defaults_are_the_resolvers_defaults(tmp_path):
    assert load_settings(env={"TOY_STATE_DIR": str(tmp_path)}).calendar.dayparts() == dict(DEFAULT_DAYPARTS)


async def test_the_confirmation_says_the_time_back(registry, ports):
    kernel = EventKernel(registry)
    outcome = await run(kernel, request(NAME), utterance="remind me to water the plants tomorrow morning")
    assert outcome.results[0].status is EventStatus.SUCCEEDED
    assert outcome.continuation.lines == ("OK, I'll remind you to water the plants on Tuesday, December 1 "
                                          "at 8:00 AM.",)
    zh = await run(kernel, request(NAME, turn="t2"), utterance="明天下午提醒我浇花")
    assert zh.continuation.lines == ("好的，12月1日 下午3:00 提醒你：浇花。",)
    assert len(await ports.calendar.list()) == 2
