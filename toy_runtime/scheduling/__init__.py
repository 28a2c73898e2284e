"""Schedules over time: pure recurrence math (recurrence.py) — no clock, no I/O.

The store lives behind the calendar port (toy_runtime/ports/calendar.py); the reminder scheduler that fires
`schedule.triggered` host events is in toy_runtime/host/scheduler.py.
"""

from .recurrence import RecurrenceError, latest_due, next_occurrence, normalize_recurrence, occurrences, reminder_time

__all__ = [
    "RecurrenceError",
    "latest_due",
    "next_occurrence",
    "normalize_recurrence",
    "occurrences",
    "reminder_time",
]
