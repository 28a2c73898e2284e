"""The calendar/reminder store port and its values."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping, Protocol, Sequence


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
    """Durable schedules. `create` is idempotent by key: a repeated key returns the first entry, created=False."""

    async def create(self, request: ScheduleRequest, idempotency_key: str) -> tuple[ScheduleEntry, bool]: ...

    async def list(self, *, include_inactive: bool = False) -> Sequence[ScheduleEntry]: ...

    async def cancel(self, entry_id: str) -> bool: ...
