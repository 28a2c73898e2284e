"""An in-memory CalendarStore, idempotent by key."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Sequence

from ..ports.calendar import ScheduleEntry, ScheduleRequest
from ..ports.clock import Clock, SystemClock


class MemoryCalendarStore:
    """Schedules in a dict. A repeated idempotency key returns the first entry with created=False.

    `calls` counts create() calls (including replays), so tests can tell a replay from a skipped call.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self.calls = 0
        self._entries: dict[str, ScheduleEntry] = {}
        self._by_key: dict[str, str] = {}
        self._ids = itertools.count(1)

    async def create(self, request: ScheduleRequest, idempotency_key: str) -> tuple[ScheduleEntry, bool]:
        """Store `request` once per key."""
        self.calls += 1
        if request.start_at.tzinfo is None:
            raise ValueError("start_at must be an aware datetime")
        existing = self._by_key.get(idempotency_key)
        if existing is not None:
            return self._entries[existing], False
        entry = ScheduleEntry(
            id=f"sch_{next(self._ids)}",
            title=request.title,
            start_at=request.start_at,
            timezone=request.timezone,
            recurrence=dict(request.recurrence) if request.recurrence else None,
            reminder_minutes=request.reminder_minutes,
            idempotency_key=idempotency_key,
            created_at=self.clock.now(),
        )
        self._entries[entry.id] = entry
        self._by_key[idempotency_key] = entry.id
        return entry, True

    async def list(self, *, include_inactive: bool = False) -> Sequence[ScheduleEntry]:
        """Entries in creation order (active ones only unless asked)."""
        return [e for e in self._entries.values() if include_inactive or e.status == "active"]

    async def cancel(self, entry_id: str) -> bool:
        """Mark an active entry cancelled; False when unknown or not active."""
        entry = self._entries.get(entry_id)
        if entry is None or entry.status != "active":
            return False
        self._entries[entry_id] = replace(entry, status="cancelled")
        return True
