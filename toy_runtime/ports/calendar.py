"""The calendar port: the schedule half (`CalendarStore`), the reminder half (`ReminderStore`) and their values.

The reminder types live here, not beside the scheduler (`host/scheduler.py`), so an adapter implementing the port
never imports an application package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Mapping, Protocol, Sequence, get_args

from ..errors import ToyError


class CalendarStorageError(ToyError):
    """The store could not write (a full disk, a read-only file system, an I/O error): nothing was stored."""

    code = "calendar_storage_failed"


@dataclass(frozen=True)
class ScheduleRequest:
    """A schedule to create, with normalized values (aware start time, IANA zone)."""

    title: str
    start_at: datetime
    timezone: str
    recurrence: Mapping[str, Any] | None = None  # {"frequency": "daily"|"weekly"|"weekdays", "days": ["MO", ...]}
    reminder_minutes: int = 0


@dataclass(frozen=True)
class ScheduleEntry:
    """A stored schedule."""

    id: str
    title: str
    start_at: datetime
    timezone: str
    recurrence: Mapping[str, Any] | None
    reminder_minutes: int
    idempotency_key: str
    created_at: datetime
    status: str = "active"  # active | cancelled | done
    meta: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "start_at": self.start_at.isoformat(),
            "timezone": self.timezone,
            "recurrence": dict(self.recurrence) if self.recurrence else None,
            "reminder_minutes": self.reminder_minutes,
            "status": self.status,
            "created_at": self.created_at.isoformat(),
        }


class CalendarStore(Protocol):
    """Durable schedules. `create` is idempotent by key: a repeated key returns the first entry, created=False.
    A write the storage refuses raises `CalendarStorageError` (and changes nothing)."""

    async def create(self, request: ScheduleRequest, idempotency_key: str) -> tuple[ScheduleEntry, bool]: ...

    async def list(self, *, include_inactive: bool = False) -> Sequence[ScheduleEntry]: ...

    async def cancel(self, entry_id: str) -> bool: ...


Outcome = Literal["spoken", "missed"]
"""How a handled occurrence is recorded: its reminder was spoken, or it came too late and was recorded as missed."""
OUTCOMES: tuple[str, ...] = get_args(Outcome)


@dataclass(frozen=True)
class DueOccurrence:
    """One occurrence of an entry whose reminder time has come and which has not been recorded as fired."""

    entry: ScheduleEntry
    occurrence_at: datetime  # the occurrence's start, aware, in the entry's zone
    remind_at: datetime  # occurrence_at - reminder_minutes


class ReminderStore(Protocol):
    """The reminder half: what the reminder scheduler needs. Rules (also in docs/schedules.md):

    - `due_occurrences(until)`: per active entry, the *latest* occurrence whose reminder time is at or before `until`
      and which starts after any recorded one; ordered by reminder time.
    - `mark_fired(entry_id, occurrence_at, outcome)`: record it once (False when already recorded; KeyError for an
      unknown entry, ValueError for an unknown outcome); a one-off entry becomes "done".
    - `next_reminder_at(after)`: the earliest reminder time strictly after `after` over active entries, or None.
    """

    async def due_occurrences(self, until: datetime) -> Sequence[DueOccurrence]: ...

    async def mark_fired(self, entry_id: str, occurrence_at: datetime, outcome: Outcome) -> bool: ...

    async def next_reminder_at(self, after: datetime) -> datetime | None: ...


class Calendar(CalendarStore, ReminderStore, Protocol):
    """Both halves: what the runtime holds (plugins see only `CalendarStore`, the scheduler only `ReminderStore`)."""
