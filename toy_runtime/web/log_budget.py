"""Log lines a hostile client cannot multiply: a budget of lines per window, then one line saying how many were held.

A neighbour on the network decides how often the console's server has something to complain about (a malformed
request, a flood that exhausts file descriptors). Every such line is cheap for them and costly for the toy: journald
fills and the child's turn competes for the disk. So each kind of complaint gets `burst` lines per `window_s`; the
rest are counted and said in one line when the window ends (or when the console closes).

    budget = LogBudget(burst=5, window_s=60)
    if budget.allow():  log one short line
    held = budget.take_held()       # how many were held back in windows that have ended
"""

from __future__ import annotations

import logging
import time
from typing import Callable

__all__ = ["BadRequestLogFilter", "LogBudget"]

BURST = 5
WINDOW_S = 60.0


class LogBudget:
    """The first `burst` lines of each `window_s` window pass; the others are counted as held."""

    def __init__(self, *, burst: int = BURST, window_s: float = WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.burst = burst
        self.window_s = window_s
        self._clock = clock
        self._start = clock()
        self._passed = 0
        self._held_now = 0  # held in the current window
        self._held_done = 0  # held in windows that have ended, not yet told

    def _roll(self) -> None:
        now = self._clock()
        if now - self._start >= self.window_s:
            self._start = now
            self._passed = 0
            self._held_done += self._held_now
            self._held_now = 0

    def allow(self) -> bool:
        """Whether one more line may be written now (False: it is counted as held)."""
        self._roll()
        if self._passed < self.burst:
            self._passed += 1
            return True
        self._held_now += 1
        return False

    def take_held(self, *, all_windows: bool = False) -> int:
        """How many lines were held back in ended windows (with `all_windows`, the current one too); resets it."""
        self._roll()
        held = self._held_done + (self._held_now if all_windows else 0)
        self._held_done = 0
        if all_windows:
            self._held_now = 0
        return held


class BadRequestLogFilter(logging.Filter):
    """On `aiohttp.server`: a malformed request becomes one short WARNING line (the client's bytes and the parser's
    traceback stay out of the log), and every line the server writes goes through a LogBudget."""

    def __init__(self, budget: LogBudget | None = None) -> None:
        super().__init__()
        self.budget = budget or LogBudget()

    def filter(self, record: logging.LogRecord) -> bool:
        held = self.budget.take_held()
        if not self.budget.allow():
            return False
        exc = record.exc_info[1] if record.exc_info else None
        from aiohttp.http_exceptions import HttpProcessingError

        if isinstance(exc, HttpProcessingError):
            # the parser's message quotes the client's bytes: its class says what was wrong, without them
            peer = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            record.msg, record.args = "console: malformed request from %s refused (%s)", (peer, type(exc).__name__)
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        if held:
            record.msg = f"{record.msg} (and {held} more such lines not written)"
        return True

    def flush(self, logger: logging.Logger, *, final: bool = False) -> None:
        """Say how many lines were held back in ended windows (`final`: the current one too, the console closes)."""
        held = self.budget.take_held(all_windows=final)
        if held:
            logger.warning("console: %d more lines about bad requests not written in the last %g s", held,
                           self.budget.window_s)
