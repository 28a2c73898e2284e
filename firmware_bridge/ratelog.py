"""Log lines that a hostile neighbour can trigger (garbage on the broker), limited so that a flood cannot fill the
journal: at most `burst` lines per `window_s`, the rest counted and said in one line when the next window opens."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

DEFAULT_BURST = 10
DEFAULT_WINDOW_S = 60.0


class LimitedLog:
    """A logger wrapper for one kind of line (e.g. "dropped a bad message"). Thread-safe: paho's network thread and
    the event loop may both log through one instance. `clock` is injectable so tests are exact."""

    def __init__(self, logger: logging.Logger, what: str, *, burst: int = DEFAULT_BURST,
                 window_s: float = DEFAULT_WINDOW_S, clock: Callable[[], float] = time.monotonic) -> None:
        if burst < 1 or window_s <= 0:
            raise ValueError("burst must be ≥ 1 and window_s > 0")
        self.logger = logger
        self.what = what  # names the suppressed lines in the summary, e.g. "bad message"
        self.burst = burst
        self.window_s = window_s
        self.clock = clock
        self.suppressed_total = 0
        self._lock = threading.Lock()
        self._window_start: float | None = None
        self._in_window = 0
        self._suppressed = 0
        self._level = logging.WARNING  # of the lines left out, for their summary

    def log(self, level: int, msg: str, *args: Any) -> bool:
        """Log one line unless this window's burst is used up. Returns True if it was logged."""
        with self._lock:
            now = self.clock()
            summary = 0
            if self._window_start is None or now - self._window_start >= self.window_s:
                summary, self._suppressed = self._suppressed, 0
                self._window_start, self._in_window = now, 0
            allowed = self._in_window < self.burst
            if allowed:
                self._in_window += 1
            else:
                self._suppressed += 1
                self.suppressed_total += 1
                self._level = level
        if summary:
            self._summarize(level, summary)
        if allowed:
            self.logger.log(level, msg, *args)
        return allowed

    def flush(self) -> None:
        """Say now how many lines this window left out (e.g. when the endpoint stops), so no flood goes unsaid."""
        with self._lock:
            summary, self._suppressed = self._suppressed, 0
        if summary:
            self._summarize(self._level, summary)

    def _summarize(self, level: int, count: int) -> None:
        self.logger.log(level, "%d more %s line(s) were not logged in the last %.0f s", count, self.what,
                        self.window_s)

    def warning(self, msg: str, *args: Any) -> bool:
        """`log(WARNING, ...)`."""
        return self.log(logging.WARNING, msg, *args)

    def error(self, msg: str, *args: Any) -> bool:
        """`log(ERROR, ...)`."""
        return self.log(logging.ERROR, msg, *args)
