"""SqliteCalendarStore against a real SQLite file: CRUD, idempotency, durability settings, schema, fired records."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from toy_runtime.adapters.sqlite_calendar import (
    SCHEMA_VERSION,
    CalendarSchemaError,
    SqliteCalendarStore,
    entry_as_json,
)
from toy_runtime.ports.calendar import ScheduleRequest
from toy_runtime.fakes.clock import ManualClock

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")
T0 = datetime(2026, 6, 1, 6, 0, tzinfo=UTC)


def req(title="Brush teeth", start=datetime(2026, 6, 1, 19, 30, tzinfo=BERLIN), **kw) -> ScheduleRequest:
    return ScheduleRequest(title=title, start_at=start, timezone=kw.pop("timezone", "Europe/Berlin"), **kw)


@pytest.fixture
async def store(tmp_path):
    s = SqliteCalendarStore(tmp_path / "state" / "calendar.db", clock=ManualClock(T0))
    try:
        yield s
    finally:
        await s.aclose()


async def test_create_list_get_cancel(store):
    entry, created = await store.create(req(reminder_minutes=10, recurrence={"frequency": "daily"}), "key-1")
    assert created
    assert entry.id.startswith("sch_")
    assert entry.title == "Brush teeth"
    assert entry.start_at == datetime(2026, 6, 1, 19, 30, tzinfo=BERLIN)
    assert entry.start_at.tzinfo == BERLIN  # returned in the entry's own zone
    assert entry.recurrence == {"frequency": "daily"}
    assert entry.reminder_minutes == 10
    assert entry.created_at == T0
    assert entry.status == "active"

    other, _ = await store.create(req("Story time", start=datetime(2026, 6, 1, 20, 0, tzinfo=BERLIN)), "key-2")
    assert [e.id for e in await store.list()] == [entry.id, other.id]
    assert await store.get(other.id) == other

    assert await store.cancel(entry.id) is True
    assert await store.cancel(entry.id) is False  # already cancelled
    assert await store.cancel("sch_nope") is False
    assert [e.id for e in await store.list()] == [other.id]
    all_entries = {e.id: e.status for e in await store.list(include_inactive=True)}
    assert all_entries == {entry.id: "cancelled", other.id: "active"}


async def test_same_idempotency_key_gives_one_row(store, tmp_path):
    first, created1 = await store.create(req(), "dup")
    second, created2 = await store.create(req("A different title"), "dup")
    assert (created1, created2) == (True, False)
    assert second == first  # the first entry wins
    with sqlite3.connect(store.path) as raw:
        assert raw.execute("SELECT COUNT(*) FROM entries WHERE idempotency_key='dup'").fetchone()[0] == 1


async def test_concurrent_creates_with_one_key(store):
    results = await asyncio.gather(*(store.create(req(), "same") for _ in range(8)))
    assert sum(created for _, created in results) == 1
    assert len({entry.id for entry, _ in results}) == 1
    assert len(await store.list()) == 1


async def test_persists_across_reopen_and_stores_utc_text(store, tmp_path):
    entry, _ = await store.create(req(recurrence={"frequency": "weekly", "days": ["we", "MO"]}), "k")
    await store.aclose()
    reopened = SqliteCalendarStore(store.path)
    try:
        again = await reopened.get(entry.id)
        assert again == entry
        again2, created = await reopened.create(req(), "k")
        assert not created and again2.id == entry.id
    finally:
        await reopened.aclose()
    with sqlite3.connect(store.path) as raw:
        row = raw.execute("SELECT start_at, timezone, recurrence FROM entries").fetchone()
    assert row == ("2026-06-01T17:30:00Z", "Europe/Berlin", '{"days": ["MO", "WE"], "frequency": "weekly"}')


async def test_wal_full_sync_and_schema_version(store):
    pragmas = await store.pragmas()
    assert pragmas == {
        "journal_mode": "wal",
        "synchronous": "FULL",
        "user_version": SCHEMA_VERSION,
        "foreign_keys": True,
    }
    with sqlite3.connect(store.path) as raw:  # WAL is a property of the file, visible to any connection
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "cal.db"
    SqliteCalendarStore(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(CalendarSchemaError):
        SqliteCalendarStore(path)


@pytest.mark.parametrize(
    "bad",
    [
        dict(title="  "),
        dict(start=datetime(2026, 6, 1, 19, 30)),  # naive
        dict(timezone="Mars/Olympus"),
        dict(reminder_minutes=-5),
        dict(recurrence={"frequency": "hourly"}),
    ],
)
async def test_invalid_requests_are_rejected_without_a_row(store, bad):
    with pytest.raises(ValueError):
        await store.create(req(**bad), "bad")
    assert await store.list(include_inactive=True) == []


async def test_mark_fired_is_unique_and_finishes_one_offs(store):
    once, _ = await store.create(req(), "once")
    daily, _ = await store.create(req(recurrence={"frequency": "daily"}), "daily")
    assert await store.mark_fired(once.id, once.start_at, "spoken") is True
    assert await store.mark_fired(once.id, once.start_at, "spoken") is False
    assert await store.mark_fired(daily.id, daily.start_at, "missed") is True
    assert (await store.get(once.id)).status == "done"
    assert (await store.get(daily.id)).status == "active"
    records = await store.fired()
    assert {r.entry_id: r.outcome for r in records} == {once.id: "spoken", daily.id: "missed"}
    assert len(records) == 2
    with pytest.raises(KeyError):
        await store.mark_fired("sch_missing", once.start_at, "spoken")
    with pytest.raises(ValueError):
        await store.mark_fired(daily.id, daily.start_at, "maybe")  # type: ignore[arg-type]


async def test_entry_as_json_includes_next_reminder(store):
    entry, _ = await store.create(req(reminder_minutes=10, recurrence={"frequency": "daily"}), "j")
    data = entry_as_json(entry, now=datetime(2026, 6, 1, 18, 0, tzinfo=UTC))  # 20:00 Berlin, after today's
    assert data["id"] == entry.id and data["status"] == "active"
    assert data["next_reminder_at"] == "2026-06-02T19:20:00+02:00"
