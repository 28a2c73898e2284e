"""The reminder scheduler: fires due schedule reminders as `schedule.triggered` host events.

A reminder is a host event of its own (source "scheduler", actor "system", subject the schedule entry) — never a
user utterance. The binding that receives it decides delivery (open an audio session and speak a template or a
short ChatAgent line).

Timing is read from the injected Clock, so `tick()` is exact under a ManualClock; `run()` loops over `tick()`.

Missed-reminder rule (also in docs/schedules.md)
------------------------------------------------
* An occurrence's reminder time is its start minus `reminder_minutes`. It is due once the clock reaches that time.
* A due occurrence at most `max_late_s` seconds late (default 600 s) is delivered — spoken.
* One more than `max_late_s` late (the runtime was down, or delivery kept failing) is recorded as "missed" and not
  spoken.
* A recurring entry only ever has its *latest* due occurrence considered: after a long downtime, that one is
  delivered or recorded as missed, earlier ones are skipped without a record, and the next future one is scheduled.
* An occurrence is recorded as fired ("spoken") only after `deliver()` returned True. A delivery that returns False or
  raises is retried on the next tick (while still within `max_late_s`); a crash between delivery and the record
  re-delivers after restart — at-least-once, never silently lost. The fired record is unique per
  (entry, occurrence), so nothing fires twice once recorded, across restarts too.
* A record the store refuses (a full disk: `CalendarStorageError`) is kept in memory and retried at every tick; until
  it is written the occurrence is not delivered again by this process (one warning, not a reminder every few
  seconds). A restart before it was written re-delivers it, as after a crash.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Literal, Sequence

from ..ports.calendar import (Calendar, CalendarStorageError, DueOccurrence, Outcome, ReminderStore, ScheduleEntry,
                              ScheduleRequest)
from ..ports.clock import Clock
from .envelope import ActorRef, AgentInput, DeliveryContext, EventSource, EventType, HostEvent, SubjectRef

log = logging.getLogger(__name__)

UTC = timezone.utc


@dataclass(frozen=True)
class TickResult:
    """What one pass did with one occurrence: spoken, missed, or failed (deliver refused; retried next tick)."""

    entry_id: str
    occurrence_at: datetime
    outcome: Literal["spoken", "missed", "failed"]
    late_s: float


Deliver = Callable[[HostEvent], Awaitable[bool]]


def reminder_event(due: DueOccurrence, *, late_s: float, now: datetime) -> HostEvent:
    """The `schedule.triggered` envelope for one due occurrence."""
    entry = due.entry
    return HostEvent(
        event_type=EventType.SCHEDULE_TRIGGERED,
        event_time=now.timestamp(),
        source=EventSource(kind="scheduler", name="reminders"),
        actor=ActorRef(kind="system"),
        subject=SubjectRef(kind="schedule", id=entry.id),
        input=AgentInput(
            data={
                "entry_id": entry.id,
                "title": entry.title,
                "start_at": entry.start_at.isoformat(),
                "occurrence_at": due.occurrence_at.isoformat(),
                "timezone": entry.timezone,
                "late_s": int(late_s),
                "reminder_minutes": entry.reminder_minutes,
            }
        ),
        delivery=DeliveryContext(surface="speaker"),
        # Stable per occurrence, so a re-delivery can be recognised downstream.
        metadata={"occurrence_key": f"{entry.id}@{due.occurrence_at.isoformat()}"},
    )


class ReminderScheduler:
    """Fires due reminders through `deliver` and records them in the store (rule: module docstring)."""

    def __init__(
        self,
        store: ReminderStore,
        clock: Clock,
        deliver: Deliver,
        *,
        max_late_s: float = 600.0,
        poll_s: float = 30.0,
        retry_s: float = 5.0,
    ) -> None:
        if max_late_s < 0 or poll_s <= 0 or retry_s <= 0:
            raise ValueError("max_late_s must be >= 0 and poll_s, retry_s > 0")
        self._store = store
        self._clock = clock
        self._deliver = deliver
        self.max_late_s = max_late_s
        self.poll_s = poll_s  # longest sleep, so a wall-clock jump (NTP, suspend) is noticed within it
        self.retry_s = retry_s  # sleep after a refused delivery
        self._wake = asyncio.Event()
        self._tick_lock = asyncio.Lock()
        # delivered (or missed) occurrences whose record the store refused, retried every tick: outcome by key
        self._unrecorded: dict[tuple[str, datetime], Outcome] = {}
        self._warned_unrecorded = False

    def notify_changed(self) -> None:
        """Wake `run()` now (call after creating or cancelling a schedule so a near reminder is not slept past)."""
        self._wake.set()

    async def tick(self) -> list[TickResult]:
        """One pass: deliver or record every occurrence due at clock.now()."""
        # Serialised: a manual tick() next to run() must not deliver the same occurrence twice.
        async with self._tick_lock:
            for (entry_id, occurrence_at), outcome in list(self._unrecorded.items()):
                await self._record(entry_id, occurrence_at, outcome)
            if not self._unrecorded:
                self._warned_unrecorded = False  # the next spell of refused records warns again
            results: list[TickResult] = []
            for due in await self._store.due_occurrences(self._clock.now()):
                if (due.entry.id, due.occurrence_at) in self._unrecorded:
                    continue  # already delivered; only its record is missing
                results.append(await self._handle(due))
            return results

    async def _record(self, entry_id: str, occurrence_at: datetime, outcome: Outcome) -> None:
        """Record a fired occurrence; one the store refuses is remembered and retried by the next tick."""
        key = (entry_id, occurrence_at)
        try:
            await self._store.mark_fired(entry_id, occurrence_at, outcome)
        except KeyError:  # the entry is gone (cancelled and purged): nothing left to record
            pass
        except CalendarStorageError as exc:
            self._unrecorded[key] = outcome
            if not self._warned_unrecorded:
                self._warned_unrecorded = True
                log.warning("reminder %s @ %s %s but not recorded (%s); retried at every tick, not repeated",
                            entry_id, occurrence_at.isoformat(), outcome, exc)
            return
        self._unrecorded.pop(key, None)

    async def _handle(self, due: DueOccurrence) -> TickResult:
        # Lateness is measured per occurrence: an earlier delivery in the same pass may have taken a while.
        now = self._clock.now().astimezone(UTC)
        late_s = max(0.0, (now - due.remind_at.astimezone(UTC)).total_seconds())
        entry_id = due.entry.id
        if late_s > self.max_late_s:
            await self._record(entry_id, due.occurrence_at, "missed")
            log.info("reminder %s @ %s missed (%.0f s late)", entry_id, due.occurrence_at.isoformat(), late_s)
            return TickResult(entry_id, due.occurrence_at, "missed", late_s)
        delivered = await self._try_deliver(reminder_event(due, late_s=late_s, now=now))
        if delivered:
            await self._record(entry_id, due.occurrence_at, "spoken")
        return TickResult(entry_id, due.occurrence_at, "spoken" if delivered else "failed", late_s)

    async def _try_deliver(self, event: HostEvent) -> bool:
        try:
            return bool(await self._deliver(event))
        except asyncio.CancelledError:
            raise
        except Exception:
            # One broken delivery must not stop the scheduler; the occurrence stays due and is retried.
            log.exception("reminder delivery failed for %s", event.subject.id if event.subject else "?")
            return False

    async def _sleep_s(self, failed: bool) -> float:
        now = self._clock.now().astimezone(UTC)
        delay = self.poll_s
        if failed:
            delay = min(delay, self.retry_s)
        nxt = await self._store.next_reminder_at(now)
        if nxt is not None:
            delay = min(delay, max(0.0, (nxt.astimezone(UTC) - now).total_seconds()))
        return delay

    async def run(self) -> None:
        """Fire reminders until cancelled: tick, then sleep until the next reminder (at most poll_s)."""
        while True:
            # Cleared before the pass, so a notify_changed() during tick() is not lost.
            self._wake.clear()
            try:
                results = await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A store error (disk full, locked DB) must not end the task; try again after a poll.
                log.exception("reminder tick failed")
                results = [TickResult("", self._clock.now(), "failed", 0.0)]
            failed = any(r.outcome == "failed" for r in results)
            try:
                delay = await self._sleep_s(failed)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("next reminder lookup failed")
                delay = self.poll_s
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=delay)
            except TimeoutError:
                pass


class ObservedCalendar:
    """A calendar (both halves of the port) that tells listeners — the reminder scheduler — when schedules change."""

    def __init__(self, store: Calendar) -> None:
        self.store = store
        self._listeners: list[Callable[[], None]] = []

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()

    async def create(self, request: ScheduleRequest, idempotency_key: str) -> tuple[ScheduleEntry, bool]:
        entry, created = await self.store.create(request, idempotency_key)
        if created:
            self._changed()
        return entry, created

    async def list(self, *, include_inactive: bool = False) -> Sequence[ScheduleEntry]:
        return await self.store.list(include_inactive=include_inactive)

    async def cancel(self, entry_id: str) -> bool:
        cancelled = await self.store.cancel(entry_id)
        if cancelled:
            self._changed()
        return cancelled

    async def due_occurrences(self, until: datetime) -> Sequence[DueOccurrence]:
        return await self.store.due_occurrences(until)

    async def mark_fired(self, entry_id: str, occurrence_at: datetime, outcome: Outcome) -> bool:
        return await self.store.mark_fired(entry_id, occurrence_at, outcome)

    async def next_reminder_at(self, after: datetime) -> datetime | None:
        return await self.store.next_reminder_at(after)

    def __getattr__(self, name: str) -> Any:  # what a store offers beyond the port (aclose, fired, pragmas…)
        return getattr(self.store, name)


def start_scheduler(calendar: Calendar, clock: Clock, deliver: Deliver, *,
                    max_late_s: float) -> tuple[ReminderScheduler, asyncio.Task]:
    """Start the reminder scheduler as a named task over the runtime's calendar; returns (scheduler, task).

    `deliver` is the runtime's router (`runtime.router.dispatch`): the command's `schedule.triggered` binding says
    how a reminder reaches the child. `max_late_s`: `[calendar] max_late_s`."""
    store = calendar
    scheduler = ReminderScheduler(store, clock, deliver, max_late_s=max_late_s)
    if isinstance(store, ObservedCalendar):
        store.on_change(scheduler.notify_changed)
    task = asyncio.create_task(scheduler.run(), name="reminder-scheduler")
    return scheduler, task
