"""calendar.schedule.create: structured and spoken times, vague times never guessed, idempotent creation."""

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from toy_runtime.events import EventKernel, EventStatus, ResolutionPath, ResultPolicy, Risk, ScriptedFallback
from toy_runtime.fakes import MemoryCalendarStore
from toy_runtime.plugins.calendar_schedule import NAME, TOOL_NAME, confirmation, extract_title
from toy_runtime.ports.calendar import ScheduleRequest

from toy_runtime.events import resolve_deterministic

from .helpers import NY, NY_BEFORE_FALL_BACK, SH, SH_NOW, ctx, request, resolve, run

BRUSH = {"title": "brush my teeth", "start_at": "2026-12-01T07:00:00+08:00", "timezone": SH}


def test_metadata(registry):
    d = registry.get(NAME)
    assert registry.by_tool_name(TOOL_NAME) is d
    assert d.result_policy is ResultPolicy.TEMPLATE_FOLLOW_UP and d.risk is Risk.MEDIUM
    assert d.concurrency_class == "calendar.write" and d.timeout_s == 3.0 and d.llm_fallback
    assert d.success_template is not None and d.retries == 0


@pytest.mark.parametrize("args", [
    BRUSH,
    {**BRUSH, "start_at": "2026-12-01T07:00:00Z", "reminder_minutes": 0},
    {**BRUSH, "recurrence": {"frequency": "daily"}},
    {**BRUSH, "recurrence": {"frequency": "weekly", "days": ["MO", "WE"]}},
])
def test_schema_accepts(registry, args):
    assert registry.validator(NAME).is_valid(args)


@pytest.mark.parametrize("args", [
    {k: v for k, v in BRUSH.items() if k != "title"},
    {**BRUSH, "title": "   "},
    {**BRUSH, "start_at": "2026-12-01T07:00:00"},  # no offset
    {**BRUSH, "start_at": "tomorrow at 7"},
    {**BRUSH, "timezone": "not a zone"},
    {**BRUSH, "recurrence": {"frequency": "monthly"}},
    {**BRUSH, "recurrence": {"frequency": "weekly"}},
    {**BRUSH, "recurrence": {"frequency": "daily", "days": ["MO"]}},
    {**BRUSH, "reminder_minutes": -5},
    {**BRUSH, "color": "red"},
])
def test_schema_rejects(registry, args):
    assert not registry.validator(NAME).is_valid(args)


@pytest.mark.parametrize("utterance, title, start", [
    ("remind me to brush my teeth tomorrow at 7 am", "brush my teeth", "2026-12-01T07:00:00+08:00"),
    ("Remind me at 7 pm on Wednesday to call Grandma", "call Grandma", "2026-12-02T19:00:00+08:00"),
    ("set a reminder for tomorrow at 7 am to brush my teeth", "brush my teeth", "2026-12-01T07:00:00+08:00"),
    ("remind me in 10 minutes to check the oven", "check the oven", "2026-11-30T08:10:00+08:00"),
    ("wake me up tomorrow at 6:30", "wake up", "2026-12-01T06:30:00+08:00"),
    ("明天早上7点提醒我刷牙", "刷牙", "2026-12-01T07:00:00+08:00"),
    ("提醒我今天下午3点去公园", "去公园", "2026-11-30T15:00:00+08:00"),
    ("10分钟后提醒我关火", "关火", "2026-11-30T08:10:00+08:00"),
    ("明天7点半叫我起床", "起床", "2026-12-01T07:30:00+08:00"),
    ("后天晚上8点提醒我看动画片", "看动画片", "2026-12-02T20:00:00+08:00"),
])
def test_spoken_times_shanghai(registry, utterance, title, start):
    out = resolve(registry, NAME, utterance)
    assert out.outcome == "resolved", out
    assert out.arguments == {"title": title, "start_at": start, "timezone": SH}


def test_new_york_across_dst(registry):
    out = resolve(registry, NAME, "remind me to feed the cat tomorrow at 7 am", now=NY_BEFORE_FALL_BACK, tz=NY)
    assert out.arguments["start_at"] == "2026-11-01T07:00:00-05:00" and out.arguments["timezone"] == NY
    out = resolve(registry, NAME, "remind me in 2 hours to feed the cat",
                  now=datetime(2026, 11, 1, 0, 30, tzinfo=ZoneInfo(NY)), tz=NY)
    assert out.arguments["start_at"] == "2026-11-01T01:30:00-05:00"


def test_recurrence_and_reminder_from_words(registry):
    out = resolve(registry, NAME, "每天早上7点提醒我吃维生素，提前10分钟提醒")
    assert out.arguments == {"title": "吃维生素", "start_at": "2026-12-01T07:00:00+08:00", "timezone": SH,
                             "recurrence": {"frequency": "daily"}, "reminder_minutes": 10}
    out = resolve(registry, NAME, "every Monday and Wednesday at 9 remind me about piano class")
    assert out.arguments["recurrence"] == {"frequency": "weekly", "days": ["MO", "WE"]}
    assert out.arguments["start_at"] == "2026-11-30T09:00:00+08:00" and out.arguments["title"] == "piano class"
    out = resolve(registry, NAME, "每周一早上8点提醒我倒垃圾")  # Monday 08:00 is now → next Monday
    assert out.arguments["start_at"] == "2026-12-07T08:00:00+08:00"
    out = resolve(registry, NAME, "every weekday at 7 am remind me to pack my bag, remind me 10 minutes before")
    assert out.arguments["recurrence"] == {"frequency": "weekdays"} and out.arguments["reminder_minutes"] == 10
    assert out.arguments["title"] == "pack my bag"


@pytest.mark.parametrize("utterance, question", [
    ("remind me to brush my teeth tomorrow night", "What time tomorrow night should I remind you?"),
    ("remind me to call grandma later", "What time should I remind you?"),
    ("remind me to feed the fish soon", "What time should I remind you?"),
    ("remind me to brush my teeth tomorrow", "What time tomorrow should I remind you?"),
    ("明天凌晨提醒我刷牙", "明天凌晨几点提醒你？"),
    ("一会儿提醒我喝水", "你想让我几点提醒你？"),
])
def test_vague_times_ask_and_are_never_guessed(registry, utterance, question):
    out = resolve(registry, NAME, utterance)
    assert out.outcome == "incomplete" and out.missing == ("start_at",)
    assert "start_at" not in out.arguments and out.arguments.get("title")
    assert out.question == question


def test_missing_title_and_time(registry):
    out = resolve(registry, NAME, "add a schedule")
    assert out.outcome == "incomplete" and set(out.missing) == {"title", "start_at"}
    out = resolve(registry, NAME, "tomorrow at 7 am")
    assert out.missing == ("title",) and out.arguments["start_at"] == "2026-12-01T07:00:00+08:00"


def test_past_time_is_rejected(registry):
    out = resolve(registry, NAME, "remind me today at 7 am to eat breakfast")
    assert out.outcome == "invalid" and out.error_code == "past_time"
    out = resolve(registry, NAME, "", {**BRUSH, "start_at": "2026-11-29T07:00:00+08:00"})
    assert out.error_code == "past_time"


def test_structured_values(registry):
    assert resolve(registry, NAME, "", BRUSH).arguments == BRUSH
    # Z is converted to the zone; a naive time is read in the session zone; the title is tidied
    out = resolve(registry, NAME, "", {"title": "  brush   my teeth ", "start_at": "2026-12-01T07:00:00Z"})
    assert out.arguments == {"title": "brush my teeth", "start_at": "2026-12-01T15:00:00+08:00", "timezone": SH}
    out = resolve(registry, NAME, "", {"title": "x", "start_at": "2026-12-01T07:00", "timezone": NY})
    assert out.arguments["start_at"] == "2026-12-01T07:00:00-05:00" and out.arguments["timezone"] == NY
    out = resolve(registry, NAME, "", {**BRUSH, "recurrence": {"frequency": "Weekly", "days": ["monday", "Wed"]},
                                       "reminder_minutes": "15"})
    assert out.arguments["recurrence"] == {"frequency": "weekly", "days": ["MO", "WE"]}
    assert out.arguments["reminder_minutes"] == 15
    # the rule's first day on or after the start (Tuesday → Wednesday)
    assert out.arguments["start_at"] == "2026-12-02T07:00:00+08:00"


# The child's words outrank proposed values (ChatAgent tool calls and EventAgent answers alike); a proposal fills
# only what the words leave open, and never the time.  (utterance, proposed, expected title, expected start)
WORDS_WIN = [
    ("remind me to brush my teeth tomorrow at 7 am", {"title": "Brush teeth"}, "brush my teeth",
     "2026-12-01T07:00:00+08:00"),
    ("remind me to water the plants at 5 pm tomorrow", {"title": "Water plants", "start_at": "2026-12-01T07:00:00"},
     "water the plants", "2026-12-01T17:00:00+08:00"),
    ("remind me to call grandma at 7", {"start_at": "2026-12-01T07:00:00+08:00"}, "call grandma",
     "2026-11-30T19:00:00+08:00"),  # said at 08:00: the next 7 o'clock is this evening
    ("明天下午五点提醒我浇花", {"title": "浇水", "start_at": "2026-12-01T07:00:00+08:00"}, "浇花",
     "2026-12-01T17:00:00+08:00"),
    ("七点提醒我吃药", {"start_at": "2026-12-01T07:00:00+08:00"}, "吃药", "2026-11-30T19:00:00+08:00"),
    ("晚上七点提醒我吃药", {"start_at": "2026-12-01T07:00:00+08:00"}, "吃药", "2026-11-30T19:00:00+08:00"),
    # no activity named in the words: the proposed title fills the gap; the words' time still wins
    ("at 5 pm tomorrow", {"title": "water the plants", "start_at": "2026-12-01T07:00:00+08:00"},
     "water the plants", "2026-12-01T17:00:00+08:00"),
    ("明天下午五点", {"title": "浇花"}, "浇花", "2026-12-01T17:00:00+08:00"),
    # the session zone reads the words; a proposed zone does not move them
    ("remind me to feed the cat tomorrow at 7 am", {"timezone": "UTC"}, "feed the cat", "2026-12-01T07:00:00+08:00"),
]


@pytest.mark.parametrize("utterance, proposed, title, start", WORDS_WIN)
def test_the_childs_words_win_and_proposals_fill_gaps(registry, utterance, proposed, title, start):
    out = resolve(registry, NAME, utterance, proposed)
    assert out.outcome == "resolved", out
    assert out.arguments == {"title": title, "start_at": start, "timezone": SH}


@pytest.mark.parametrize("utterance, proposed, missing, question", [
    ("remind me to water the plants", {"title": "water the plants", "start_at": "2026-12-01T07:00:00+08:00"},
     ("start_at",), "What time should I remind you?"),
    ("remind me to brush my teeth tomorrow night", {"start_at": "2026-12-01T07:00:00+08:00"}, ("start_at",),
     "What time tomorrow night should I remind you?"),
    ("提醒我浇花", {"title": "浇花", "start_at": "2026-12-01T07:00:00+08:00"}, ("start_at",), "你想让我几点提醒你？"),
    ("明天凌晨提醒我刷牙", {"start_at": "2026-12-01T07:30:00+08:00"}, ("start_at",), "明天凌晨几点提醒你？"),
])
def test_no_time_said_asks_and_never_takes_a_proposed_time(registry, utterance, proposed, missing, question):
    out = resolve(registry, NAME, utterance, proposed)
    assert out.outcome == "incomplete" and out.missing == missing and out.question == question
    assert "start_at" not in out.arguments


@pytest.mark.parametrize("before, answer, title, start", [
    ("remind me to water the plants", "at 5 pm", "water the plants", "2026-11-30T17:00:00+08:00"),
    ("remind me to brush my teeth tomorrow night", "at 9", "brush my teeth", "2026-12-01T21:00:00+08:00"),
    ("remind me every day to take my vitamins", "at 7", "take my vitamins", "2026-12-01T07:00:00+08:00"),
    ("明天凌晨提醒我刷牙", "五点", "刷牙", "2026-12-01T05:00:00+08:00"),
    ("提醒我浇花", "下午五点", "浇花", "2026-11-30T17:00:00+08:00"),
])
def test_an_answer_to_our_time_question_completes_the_request(registry, before, answer, title, start):
    asked = resolve(registry, NAME, before)
    assert asked.outcome == "incomplete" and asked.question
    history = [{"role": "user", "content": before}, {"role": "assistant", "content": f"Sure! {asked.question}"}]
    out = resolve_deterministic(registry, registry.get(NAME), None, ctx(answer, history=history))
    assert out.outcome == "resolved", out
    assert out.arguments["title"] == title and out.arguments["start_at"] == start
    # without our question just before, an old request is not reused
    plain = [{"role": "user", "content": before}, {"role": "assistant", "content": "Okay!"}]
    alone = resolve_deterministic(registry, registry.get(NAME), None, ctx(answer, history=plain))
    assert alone.outcome == "incomplete" and alone.missing == ("title",)


@pytest.mark.parametrize("args, code", [
    ({**BRUSH, "timezone": "Mars/Olympus"}, "unknown_timezone"),
    ({**BRUSH, "start_at": "2026-13-01T07:00"}, "invalid_time"),
    ({**BRUSH, "recurrence": {"frequency": "monthly"}}, "invalid_recurrence"),
    ({**BRUSH, "reminder_minutes": -1}, "invalid_reminder"),
])
def test_invalid_structured_values(registry, args, code):
    out = resolve(registry, NAME, "", args)
    assert out.outcome == "invalid" and out.error_code == code


def test_vague_structured_start_is_ambiguous(registry):
    out = resolve(registry, NAME, "", {**BRUSH, "start_at": "tomorrow"})
    assert out.outcome == "incomplete" and out.missing == ("start_at",)
    assert out.question == "What time tomorrow should I remind you?"
    # a part of day is the household's time in both invocation modes
    assert resolve(registry, NAME, "", {**BRUSH, "start_at": "tomorrow morning"}).arguments["start_at"] == \
        "2026-12-01T08:00:00+08:00"
    assert resolve(registry, NAME, "", {**BRUSH, "start_at": "2026-12-01"}).missing == ("start_at",)


def test_unknown_session_zone(registry):
    out = resolve(registry, NAME, "remind me to x tomorrow at 7 am", tz="Nowhere/Land")
    assert out.error_code == "unknown_timezone"


def test_title_extraction():
    assert extract_title("remind me to brush my teeth") == "brush my teeth"
    assert extract_title("turn it up by 20 and remind me to brush my teeth") == "brush my teeth"
    assert extract_title("声音大一点，然后提醒我刷牙") == "刷牙"
    assert extract_title("我要去公园，提醒我一下") == "我要去公园"
    assert extract_title("Don't let me forget to water the plants, please") == "water the plants"
    assert extract_title("提醒我刷牙吧") == "刷牙"


def test_confirmation_templates():
    assert confirmation(BRUSH, {}) == "OK, I'll remind you to brush your teeth on Tuesday, December 1 at 7:00 AM."
    zh = {**BRUSH, "title": "刷牙"}
    assert confirmation(zh, {}) == "好的，12月1日 上午7:00 提醒你：刷牙。"
    assert confirmation({**BRUSH, "start_at": "2026-12-01T19:05:00+08:00"}, {}).endswith("at 7:05 PM.")
    assert confirmation({**BRUSH, "recurrence": {"frequency": "weekly", "days": ["MO", "WE"]}}, {}) == \
        "OK, I'll remind you to brush your teeth every Monday and Wednesday at 7:00 AM, starting Tuesday, December 1."
    assert confirmation({**zh, "recurrence": {"frequency": "daily"}}, {}) == "好的，每天 上午7:00 提醒你：刷牙（从12月1日开始）。"


# -- execution ------------------------------------------------------------------------------------------

async def test_create_through_kernel_speaks_the_confirmation(kernel, ports):
    outcome = await run(kernel, request(NAME), utterance="remind me to brush my teeth tomorrow at 7 am")
    result = outcome.results[0]
    assert result.status is EventStatus.SUCCEEDED and result.result["created"] is True
    assert result.result["title"] == "brush my teeth" and result.result["start_at"] == "2026-12-01T07:00:00+08:00"
    assert outcome.continuation.lines == ("OK, I'll remind you to brush your teeth on Tuesday, December 1 at 7:00 AM.",)
    assert not outcome.continuation.needs_llm
    entries = await ports.calendar.list()
    assert len(entries) == 1 and entries[0].idempotency_key == result.idempotency_key


async def test_vague_time_creates_nothing_and_asks(kernel, ports):
    outcome = await run(kernel, request(NAME), utterance="明天凌晨提醒我刷牙")
    assert outcome.results[0].status is EventStatus.NEEDS_CLARIFICATION
    assert outcome.continuation.lines == ("明天凌晨几点提醒你？",)
    assert ports.calendar.calls == 0


async def test_past_time_gets_a_corrective_line(kernel, ports):
    outcome = await run(kernel, request(NAME), utterance="remind me today at 7 am to eat breakfast")
    assert outcome.results[0].status is EventStatus.REJECTED
    assert outcome.continuation.lines == ("That time has already passed. When should I remind you?",)
    assert ports.calendar.calls == 0


async def test_replayed_event_creates_one_entry(kernel, ports):
    for _ in range(2):  # a retransmitted batch: same session, turn and event id
        outcome = await run(kernel, request(NAME, BRUSH, event_id="ev_cal1"))
    assert outcome.results[0].status is EventStatus.SUCCEEDED and outcome.results[0].replayed
    assert len(await ports.calendar.list()) == 1 and ports.calendar.calls == 1


async def test_store_is_idempotent_by_key():
    store = MemoryCalendarStore()
    req = ScheduleRequest(title="x", start_at=SH_NOW, timezone=SH)
    first, created = await store.create(req, "key-1")
    again, created_again = await store.create(req, "key-1")
    other, _ = await store.create(req, "key-2")
    assert created and not created_again and first.id == again.id != other.id
    assert await store.cancel(first.id) and not await store.cancel(first.id)
    assert [e.id for e in await store.list()] == [other.id]


async def test_a_vague_time_is_asked_not_handed_to_the_event_agent(registry, ports):
    fallback = ScriptedFallback({NAME: {"start_at": "2026-12-01T07:30:00+08:00"}})
    kernel = EventKernel(registry, fallback=fallback)
    outcome = await run(kernel, request(NAME), utterance="remind me to brush my teeth tomorrow night")
    assert fallback.calls == []  # only the child can say the time: no EventAgent call is spent on a guess
    assert outcome.results[0].status is EventStatus.NEEDS_CLARIFICATION
    assert outcome.continuation.lines == ("What time tomorrow night should I remind you?",)
    assert ports.calendar.calls == 0


async def test_llm_fallback_fills_a_missing_title_but_never_the_time(registry, ports):
    fallback = ScriptedFallback({NAME: {"title": "brush my teeth", "start_at": "2026-12-01T07:30:00+08:00"}})
    kernel = EventKernel(registry, fallback=fallback)
    outcome = await run(kernel, request(NAME), utterance="tomorrow at 7 pm please")
    result = outcome.results[0]
    assert fallback.calls == [(NAME, ("title",))]
    assert result.status is EventStatus.SUCCEEDED and result.resolution is ResolutionPath.LLM_FALLBACK
    assert result.arguments["start_at"] == "2026-12-01T19:00:00+08:00" and result.arguments["title"] == "brush my teeth"


async def test_llm_fallback_that_stays_vague_still_asks(registry, ports):
    kernel = EventKernel(registry, fallback=ScriptedFallback({NAME: {"start_at": "tomorrow night"}}))
    outcome = await run(kernel, request(NAME), utterance="remind me to brush my teeth tomorrow night")
    assert outcome.results[0].status is EventStatus.NEEDS_CLARIFICATION
    assert ports.calendar.calls == 0


def test_title_stops_where_the_next_request_starts():
    from toy_runtime.plugins.calendar_schedule import extract_title

    assert extract_title("remind me to feed the cat and make it louder") == "feed the cat"
    assert extract_title("remind me to eat bread and butter") == "eat bread and butter"
    assert extract_title("提醒我起床，然后说晚安") == "起床"
