"""One CalendarStore contract, run against the in-memory fake and the SQLite adapter so they cannot drift."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from toy_runtime.adapters.sqlite_calendar import SqliteCalendarStore
from toy_runtime.fakes.calendar import MemoryCalendarStore
from toy_runtime.ports.calendar import ScheduleRequest
from toy_runtime.fakes.clock import ManualClock

T0 = datetime(2026, 6, 1, 6, 0, tzinfo=timezone.utc)


@pytest.fixture(params=["memory", "sqlite"])
async def store(request, tmp_path):
    clock = ManualClock(T0)
    if request.param == "memory":
        yield MemoryCalendarStore(clock=clock)
        return
    s = SqliteCalendarStore(tmp_path / "calendar.db", clock=clock)
    try:
        yield s
    finally:
        await s.aclose()


def make(title: str, hour: int) -> ScheduleRequest:
    return ScheduleRequest(
        title=title,
        start_at=datetime(2026, 6, 1, hour, 0, tzinfo=ZoneInfo("Europe/Berlin")),
        timezone="Europe/Berlin",
        recurrence={"frequency": "daily"},
        reminder_minutes=5,
    )


async def test_contract_create_is_idempotent_by_key(store):
    first, created = await store.create(make("Breakfast", 8), "key")
    again, created_again = await store.create(make("Something else", 9), "key")
    assert (created, created_again) == (True, False)
    assert again.id == first.id and again.title == "Breakfast"
    assert first.start_at == datetime(2026, 6, 1, 6, 0, tzinfo=timezone.utc)
    assert first.recurrence == {"frequency": "daily"}
    assert first.reminder_minutes == 5 and first.created_at == T0 and first.status == "active"
    assert len(await store.list()) == 1


async def test_contract_list_and_cancel(store):
    a, _ = await store.create(make("A", 8), "a")
    b, _ = await store.create(make("B", 9), "b")
    assert [e.id for e in await store.list()] == [a.id, b.id]
    assert await store.cancel(a.id) is True
    assert await store.cancel(a.id) is False
    assert await store.cancel("unknown") is False
    assert [e.id for e in await store.list()] == [b.id]
    assert {e.id: e.status for e in await store.list(include_inactive=True)} == {a.id: "cancelled", b.id: "active"}


async def test_contract_naive_start_is_rejected(store):
    with pytest.raises(ValueError):
        await store.create(ScheduleRequest(title="x", start_at=datetime(2026, 6, 1, 8), timezone="UTC"), "n")


# -- the reminder half (ReminderStore) ---------------------------------------------------------------------------

BERLIN = ZoneInfo("Europe/Berlin")


def once(title: str, start: datetime, minutes: int = 10) -> ScheduleRequest:
    return ScheduleRequest(title=title, start_at=start, timezone="Europe/Berlin", reminder_minutes=minutes)


async def test_contract_reminder_is_due_at_its_time_and_fires_once(store):
    start = datetime(2026, 6, 1, 19, 30, tzinfo=BERLIN)  # 17:30 UTC, reminder at 17:20 UTC
    entry, _ = await store.create(once("Brush teeth", start), "teeth")
    assert await store.next_reminder_at(T0) == datetime(2026, 6, 1, 17, 20, tzinfo=timezone.utc)
    assert await store.due_occurrences(datetime(2026, 6, 1, 17, 19, tzinfo=timezone.utc)) == []
    (due,) = await store.due_occurrences(datetime(2026, 6, 1, 17, 20, tzinfo=timezone.utc))
    assert due.entry.id == entry.id and due.occurrence_at == start
    assert due.remind_at == datetime(2026, 6, 1, 17, 20, tzinfo=timezone.utc)
    assert await store.mark_fired(entry.id, due.occurrence_at, "spoken") is True
    assert await store.mark_fired(entry.id, due.occurrence_at, "spoken") is False
    assert await store.due_occurrences(datetime(2026, 6, 2, tzinfo=timezone.utc)) == []
    assert await store.next_reminder_at(T0) is None
    assert {e.id: e.status for e in await store.list(include_inactive=True)} == {entry.id: "done"}


async def test_contract_recurring_entry_offers_only_its_latest_due_occurrence(store):
    entry, _ = await store.create(make("Breakfast", 8), "breakfast")  # daily 08:00 Berlin, reminder 5 min before
    (due,) = await store.due_occurrences(datetime(2026, 6, 4, 7, 0, tzinfo=timezone.utc))  # after three days down
    assert due.occurrence_at == datetime(2026, 6, 4, 8, 0, tzinfo=BERLIN)
    assert await store.mark_fired(entry.id, due.occurrence_at, "missed") is True
    assert await store.due_occurrences(datetime(2026, 6, 4, 7, 0, tzinfo=timezone.utc)) == []
    assert await store.next_reminder_at(datetime(2026, 6, 4, 7, 0, tzinfo=timezone.utc)) == datetime(
        2026, 6, 5, 5, 55, tzinfo=timezone.utc)
    assert [e.status for e in await store.list()] == ["active"]  # a recurring entry stays active


async def test_contract_due_occurrences_are_ordered_and_skip_cancelled(store):
    late, _ = await store.create(once("Late", datetime(2026, 6, 1, 12, 0, tzinfo=BERLIN), minutes=0), "late")
    early, _ = await store.create(once("Early", datetime(2026, 6, 1, 11, 0, tzinfo=BERLIN), minutes=0), "early")
    gone, _ = await store.create(once("Gone", datetime(2026, 6, 1, 10, 0, tzinfo=BERLIN), minutes=0), "gone")
    await store.cancel(gone.id)
    until = datetime(2026, 6, 1, 13, 0, tzinfo=BERLIN)
    assert [d.entry.id for d in await store.due_occurrences(until)] == [early.id, late.id]


async def test_contract_mark_fired_rejects_unknown_outcome_and_entry(store):
    entry, _ = await store.create(once("x", datetime(2026, 6, 1, 12, 0, tzinfo=BERLIN)), "x")
    with pytest.raises(ValueError):
        await store.mark_fired(entry.id, entry.start_at, "sung")
    with pytest.raises(KeyError):
        await store.mark_fired("unknown", entry.start_at, "spoken")
