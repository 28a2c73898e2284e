"""How long the process has been alive: start-up marks for the `runtime.ready` record.

The clock starts when the kernel created the process (`/proc/self/stat`), not when our code first ran, so the
interpreter's own start and every import before `main` are counted: that is what "ready N ms after start" means to
someone who starts the service.
"""

from __future__ import annotations

import os
import time

__all__ = ["StartupMarks", "process_marks", "since_process_start_ms"]


def since_process_start_ms() -> float | None:
    """Milliseconds since this process was created (10 ms resolution), or None where /proc is missing."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        started_s = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat(5): start time in clock ticks
        return round((time.clock_gettime(time.CLOCK_BOOTTIME) - started_s) * 1000, 1)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class StartupMarks:
    """Named points in start-up, in ms since the process was created (relative to the first mark without /proc)."""

    def __init__(self) -> None:
        self._origin = time.monotonic()
        self._offset = since_process_start_ms()
        self.marks: dict[str, float] = {}

    def now_ms(self) -> float:
        """Time since process start (or since this object was made, when /proc is unavailable)."""
        elapsed = (time.monotonic() - self._origin) * 1000
        return round(elapsed + (self._offset or 0.0), 1)

    def mark(self, name: str) -> float:
        """Record `name` at the current time; returns it."""
        self.marks[name] = value = self.now_ms()
        return value


_PROCESS_MARKS: StartupMarks | None = None


def process_marks() -> StartupMarks:
    """The process-wide marks (made on first use: the CLI touches it before its heavy imports)."""
    global _PROCESS_MARKS
    if _PROCESS_MARKS is None:
        _PROCESS_MARKS = StartupMarks()
    return _PROCESS_MARKS
