"""The SQLite calendar on a real full disk (a 1 MB tmpfs, root only): a refused write is the port's
CalendarStorageError and stores nothing, what was stored before stays, and the store works again once space returns.
The reminder event turns that error into a failure the child is told about, in English or Chinese."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from toy_runtime.adapters.sqlite_calendar import SqliteCalendarStore
from toy_runtime.fakes.clock import ManualClock
from toy_runtime.plugins.calendar_speech import failure_line
from toy_runtime.ports.calendar import CalendarStorageError, ScheduleRequest

T0 = datetime(2026, 6, 1, 6, 0, tzinfo=timezone.utc)


def req(title: str) -> ScheduleRequest:
    return ScheduleRequest(title=title, start_at=datetime(2026, 6, 2, 19, 30, tzinfo=timezone.utc), timezone="UTC")


async def test_a_full_disk_refuses_the_write_and_keeps_what_was_stored(small_disk):
    store = SqliteCalendarStore(small_disk.path / "calendar.sqlite3", clock=ManualClock(T0))
    try:
        await store.create(req("brush teeth"), "key-1")
        small_disk.fill()
        with pytest.raises(CalendarStorageError, match="full"):
            # titles long enough that a page of the database or its WAL must grow
            for n in range(50):
                await store.create(req(f"water the plants {n} " + "x" * 2000), f"key-{n + 2}")
        titles = [e.title for e in await store.list()]  # (same start and creation time: any order)
        assert "brush teeth" in titles and len(titles) < 51
        small_disk.free()
        await store.create(req("feed the cat"), "key-late")
        assert "feed the cat" in [e.title for e in await store.list()]
    finally:
        await store.aclose()
    reopened = SqliteCalendarStore(small_disk.path / "calendar.sqlite3", clock=ManualClock(T0))
    try:
        kept = {e.title for e in await reopened.list()}
    finally:
        await reopened.aclose()
    assert {"brush teeth", "feed the cat"} <= kept

def test_a_reminder_that_was_not_stored_is_said_so():
    assert failure_line({"title": "brush teeth"}, {"code": "not_stored"}) == "Sorry, I couldn't save that reminder."
    assert failure_line({"title": "刷牙"}, {"code": "not_stored"}) == "抱歉，我没能保存这个提醒。"


async def test_a_reminder_delivered_on_a_full_disk_is_said_once_and_recorded_when_space_returns(small_disk):
    from toy_runtime.host.scheduler import ReminderScheduler

    from .test_reminders import Recorder

    clock = ManualClock(T0)
    store = SqliteCalendarStore(small_disk.path / "calendar.sqlite3", clock=clock)
    try:
        entry, _ = await store.create(req("brush teeth"), "key-1")
        deliver = Recorder()
        scheduler = ReminderScheduler(store, clock, deliver)
        clock.set(datetime(2026, 6, 2, 19, 30, tzinfo=timezone.utc))
        small_disk.fill()
        first = await scheduler.tick()
        again = await scheduler.tick()  # the record is still refused: the child does not hear it twice
        assert [r.outcome for r in first] == ["spoken"] and again == [] and len(deliver.events) == 1
        assert await store.fired(entry.id) == []
        small_disk.free()
        assert await scheduler.tick() == [] and len(deliver.events) == 1
        assert [f.outcome for f in await store.fired(entry.id)] == ["spoken"]
    finally:
        await store.aclose()
