"""Schedules over time: recurrence math (recurrence.py) and the reminder scheduler (reminders.py).

The store lives behind the calendar port (toy_runtime/ports/calendar.py); the SQLite adapter
(toy_runtime/adapters/sqlite_calendar.py) also implements `ReminderStore`, what the scheduler needs.
"""

from .recurrence import RecurrenceError, latest_due, next_occurrence, normalize_recurrence, occurrences, reminder_time
from .reminders import DueOccurrence, ReminderScheduler, ReminderStore, TickResult, reminder_event

__all__ = [
    "DueOccurrence",
    "RecurrenceError",
    "ReminderScheduler",
    "ReminderStore",
    "TickResult",
    "latest_due",
    "next_occurrence",
    "normalize_recurrence",
    "occurrences",
    "reminder_event",
    "reminder_time",
]
