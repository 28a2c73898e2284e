"""An in-memory calendar (both halves of the port: schedules and reminders), idempotent by key."""

from __future__ import annotations

import builtins
import itertools
from dataclasses import replace
from datetime import datetime, timezone
from typing import Sequence

from ..ports.calendar import OUTCOMES, DueOccurrence, Outcome, ScheduleEntry, ScheduleRequest
from ..ports.clock import Clock, SystemClock
from ..scheduling import recurrence


class MemoryCalendarStore:
    """Schedules in a dict; fired occurrences in another. A repeated idempotency key returns the first entry with
    created=False. Reminders follow the same rule as the SQLite store (`scheduling.recurrence.due_occurrences`).

    `calls` counts create() calls (including replays), so tests can tell a replay from a skipped call.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self.calls = 0
        self._entries: dict[str, ScheduleEntry] = {}
        self._by_key: dict[str, str] = {}
        self._fired: dict[tuple[str, datetime], Outcome] = {}  # (entry id, UTC occurrence start) -> outcome
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

    # -- ReminderStore ----------------------------------------------------------------------------------------------

    def _active(self) -> builtins.list[ScheduleEntry]:
        return [e for e in self._entries.values() if e.status == "active"]

    def _last_fired(self, entry_id: str) -> datetime | None:
        return max((at for eid, at in self._fired if eid == entry_id), default=None)

    async def due_occurrences(self, until: datetime) -> Sequence[DueOccurrence]:
        """Per active entry, the latest occurrence with reminder time <= until that is newer than any fired one."""
        return recurrence.due_occurrences(((e, self._last_fired(e.id)) for e in self._active()), until)

    async def next_reminder_at(self, after: datetime) -> datetime | None:
        """The earliest reminder time strictly after `after` over active entries, or None."""
        return recurrence.next_reminder_at(self._active(), after)

    async def mark_fired(self, entry_id: str, occurrence_at: datetime, outcome: Outcome) -> bool:
        """Record an occurrence once; False if already recorded. A one-off entry becomes done."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}")
        entry = self._entries.get(entry_id)
        if entry is None:
            raise KeyError(f"no schedule {entry_id!r}")
        key = (entry_id, occurrence_at.astimezone(timezone.utc))
        if entry.recurrence is None and entry.status == "active":
            self._entries[entry_id] = replace(entry, status="done")
        if key in self._fired:
            return False
        self._fired[key] = outcome
        return True
