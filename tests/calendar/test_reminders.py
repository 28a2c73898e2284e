"""ReminderScheduler with a ManualClock over the real SQLite store: exact firing, lateness rule, at-least-once."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from toy_runtime.adapters.sqlite_calendar import SqliteCalendarStore
from toy_runtime.host.envelope import HostEvent
from toy_runtime.ports.calendar import ScheduleRequest
from toy_runtime.fakes.clock import ManualClock
from toy_runtime.host.scheduler import ReminderScheduler

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")
START = datetime(2026, 6, 1, 19, 30, tzinfo=BERLIN)  # 17:30 UTC
REMIND = datetime(2026, 6, 1, 17, 20, tzinfo=UTC)  # START - 10 min


class Recorder:
    """A deliver() that records events and answers from a script (True by default)."""

    def __init__(self, *answers: bool | Exception) -> None:
        self.events: list[HostEvent] = []
        self.answers = list(answers)
        self.delivered = asyncio.Event()

    async def __call__(self, event: HostEvent) -> bool:
        self.events.append(event)
        answer = self.answers.pop(0) if self.answers else True
        if isinstance(answer, Exception):
            raise answer
        if answer:
            self.delivered.set()
        return answer


@pytest.fixture
def clock():
    return ManualClock(datetime(2026, 6, 1, 12, 0, tzinfo=UTC))


@pytest.fixture
async def store(tmp_path, clock):
    s = SqliteCalendarStore(tmp_path / "calendar.db", clock=clock)
    try:
        yield s
    finally:
        await s.aclose()


def request(title="Brush teeth", start=START, minutes=10, recurrence=None) -> ScheduleRequest:
    return ScheduleRequest(
        title=title, start_at=start, timezone="Europe/Berlin", recurrence=recurrence, reminder_minutes=minutes
    )


async def test_fires_at_reminder_time_not_before_and_once(store, clock):
    entry, _ = await store.create(request(), "k1")
    deliver = Recorder()
    scheduler = ReminderScheduler(store, clock, deliver)

    clock.set(REMIND - timedelta(seconds=1))
    assert await scheduler.tick() == []
    assert deliver.events == []

    clock.set(REMIND)
    results = await scheduler.tick()
    assert [(r.entry_id, r.outcome, r.late_s) for r in results] == [(entry.id, "spoken", 0.0)]
    (event,) = deliver.events
    assert event.event_type == "schedule.triggered"
    assert event.source.kind == "scheduler"
    assert event.actor is not None and event.actor.kind == "system"
    assert event.subject is not None and (event.subject.kind, event.subject.id) == ("schedule", entry.id)
    assert event.input.text is None  # not disguised as user text
    assert event.input.data == {
        "entry_id": entry.id,
        "title": "Brush teeth",
        "start_at": "2026-06-01T19:30:00+02:00",
        "occurrence_at": "2026-06-01T19:30:00+02:00",
        "timezone": "Europe/Berlin",
        "late_s": 0,
        "reminder_minutes": 10,
    }
    assert event.delivery.surface == "speaker"
    assert event.event_time == REMIND.timestamp()

    clock.advance(30)
    assert await scheduler.tick() == []
    assert len(deliver.events) == 1
    assert (await store.get(entry.id)).status == "done"
    assert [r.outcome for r in await store.fired(entry.id)] == ["spoken"]


async def test_recurring_fires_each_day(store, clock):
    entry, _ = await store.create(request(recurrence={"frequency": "daily"}, minutes=0), "daily")
    deliver = Recorder()
    scheduler = ReminderScheduler(store, clock, deliver)
    for day in range(3):
        clock.set(START.astimezone(UTC) + timedelta(days=day, seconds=5))
        assert [r.outcome for r in await scheduler.tick()] == ["spoken"]
        assert await scheduler.tick() == []
    assert [e.input.data["occurrence_at"][:10] for e in deliver.events] == ["2026-06-01", "2026-06-02", "2026-06-03"]
    assert deliver.events[0].input.data["late_s"] == 5
    assert (await store.get(entry.id)).status == "active"
    assert await store.next_reminder_at(clock.now()) == datetime(2026, 6, 4, 17, 30, tzinfo=UTC)


async def test_after_downtime_late_is_missed_slightly_late_is_spoken(store, clock):
    old, _ = await store.create(request("Feed the fish"), "old")  # reminder 17:20 UTC
    daily, _ = await store.create(request("Medicine", minutes=0, recurrence={"frequency": "daily"}), "daily")
    story = request("Story time", start=datetime(2026, 6, 1, 22, 25, tzinfo=BERLIN), minutes=0)
    near, _ = await store.create(story, "near")
    deliver = Recorder()
    scheduler = ReminderScheduler(store, clock, deliver, max_late_s=600)

    clock.set(REMIND - timedelta(minutes=1))
    assert await scheduler.tick() == []
    clock.advance(3 * 3600 + 6 * 60)  # "down" for three hours: now 20:25 UTC, 22:25 Berlin
    results = {r.entry_id: r.outcome for r in await scheduler.tick()}
    assert results == {old.id: "missed", daily.id: "missed", near.id: "spoken"}
    assert [e.subject.id for e in deliver.events] == [near.id]

    clock.set(datetime(2026, 6, 1, 20, 30, tzinfo=UTC))  # Story time is now 5 minutes late
    assert await scheduler.tick() == []  # already spoken at 0 s late
    recorded = {r.entry_id: r.outcome for r in await store.fired()}
    assert recorded == {old.id: "missed", daily.id: "missed", near.id: "spoken"}


async def test_five_minutes_late_is_delivered_with_its_lateness(store, clock):
    entry, _ = await store.create(request(), "k")
    deliver = Recorder()
    scheduler = ReminderScheduler(store, clock, deliver, max_late_s=600)
    clock.set(REMIND + timedelta(minutes=5))
    assert [(r.outcome, r.late_s) for r in await scheduler.tick()] == [("spoken", 300.0)]
    assert deliver.events[0].input.data["late_s"] == 300


async def test_long_downtime_records_only_latest_recurring_occurrence(store, clock):
    entry, _ = await store.create(request(minutes=0, recurrence={"frequency": "daily"}), "daily")
    deliver = Recorder()
    scheduler = ReminderScheduler(store, clock, deliver)
    clock.set(datetime(2026, 6, 5, 21, 0, tzinfo=UTC))  # down from before June 1 until June 5, 3.5 h after
    assert [r.outcome for r in await scheduler.tick()] == ["missed"]
    records = await store.fired(entry.id)
    assert [(r.occurrence_at, r.outcome) for r in records] == [(datetime(2026, 6, 5, 17, 30, tzinfo=UTC), "missed")]
    assert deliver.events == []
    clock.set(datetime(2026, 6, 6, 17, 30, tzinfo=UTC))  # the next one fires normally
    assert [r.outcome for r in await scheduler.tick()] == ["spoken"]


async def test_refused_or_failing_delivery_is_retried(store, clock):
    entry, _ = await store.create(request(), "k")
    deliver = Recorder(False, RuntimeError("speaker busy"), True)
    scheduler = ReminderScheduler(store, clock, deliver)
    clock.set(REMIND)
    assert [r.outcome for r in await scheduler.tick()] == ["failed"]
    clock.advance(5)
    assert [r.outcome for r in await scheduler.tick()] == ["failed"]
    assert await store.fired() == []
    clock.advance(5)
    assert [r.outcome for r in await scheduler.tick()] == ["spoken"]
    assert len(deliver.events) == 3
    assert [r.outcome for r in await store.fired(entry.id)] == ["spoken"]


async def test_delivery_failing_past_the_lateness_bound_ends_missed(store, clock):
    await store.create(request(), "k")
    deliver = Recorder(False)
    scheduler = ReminderScheduler(store, clock, deliver, max_late_s=60)
    clock.set(REMIND)
    assert [r.outcome for r in await scheduler.tick()] == ["failed"]
    clock.advance(61)
    assert [r.outcome for r in await scheduler.tick()] == ["missed"]
    assert len(deliver.events) == 1


async def test_nothing_fires_twice_across_reopen(tmp_path, clock):
    path = tmp_path / "calendar.db"
    store = SqliteCalendarStore(path, clock=clock)
    await store.create(request(minutes=0, recurrence={"frequency": "daily"}), "daily")
    await store.create(request("Once"), "once")
    first = Recorder()
    clock.set(START.astimezone(UTC))
    assert len(await ReminderScheduler(store, clock, first).tick()) == 2
    await store.aclose()

    reopened = SqliteCalendarStore(path, clock=clock)
    try:
        second = Recorder()
        assert await ReminderScheduler(reopened, clock, second).tick() == []
        assert second.events == []
        clock.advance(86400)
        assert [r.outcome for r in await ReminderScheduler(reopened, clock, second).tick()] == ["spoken"]
    finally:
        await reopened.aclose()


async def test_cancelled_entry_does_not_fire(store, clock):
    entry, _ = await store.create(request(), "k")
    await store.cancel(entry.id)
    deliver = Recorder()
    clock.set(REMIND)
    assert await ReminderScheduler(store, clock, deliver).tick() == []


async def test_run_loop_fires_when_woken(store, clock):
    deliver = Recorder()
    scheduler = ReminderScheduler(store, clock, deliver, poll_s=30)
    task = asyncio.create_task(scheduler.run(), name="test-reminders")
    try:
        await asyncio.sleep(0.05)  # run() ticks once and sleeps (nothing stored yet)
        entry, _ = await store.create(request(), "k")
        clock.set(REMIND)  # the manual clock jumped: run() would notice within poll_s; wake it now
        scheduler.notify_changed()
        await asyncio.wait_for(deliver.delivered.wait(), timeout=10)
        assert deliver.events[0].subject.id == entry.id
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
