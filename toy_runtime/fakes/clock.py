"""A clock that moves only when told to: timing logic (deadlines, reminders, caches) tested without sleeping."""

from __future__ import annotations

from datetime import datetime


class ManualClock:
    """A clock that moves only when told to (tests)."""

    def __init__(self, start: datetime, monotonic: float = 0.0) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        self._now = start
        self._mono = monotonic

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        from datetime import timedelta

        self._now += timedelta(seconds=seconds)
        self._mono += seconds

    def set(self, when: datetime) -> None:
        delta = (when - self._now).total_seconds()
        self.advance(delta)
