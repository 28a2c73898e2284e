"""One CalendarStore contract, run against the in-memory fake and the SQLite adapter so they cannot drift."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from toy_runtime.adapters.sqlite_calendar import SqliteCalendarStore
from toy_runtime.fakes.calendar import MemoryCalendarStore
from toy_runtime.ports.calendar import ScheduleRequest
from toy_runtime.ports.clock import ManualClock

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
