"""An event loop on virtual time: timing logic in asyncio (timeouts, watchdogs, sleeps) tested exactly, on any machine.

The loop's clock (`loop.time()`, which `asyncio.sleep`, `asyncio.timeout` and `wait_for` read) stands still while
anything is ready to run and jumps straight to the next timer when every task waits. So "0.2 s of silence" is 0.2 s
of the loop's time however slow or busy the machine is, and a test that waits out a 3 s watchdog takes no real time.
The idea is trio's `MockClock(autojump_threshold=0)`, for asyncio.

Only for code that waits on nothing outside the loop (in-memory test doubles): while a timer is pending the loop does
not wait for a thread or a socket, it jumps. With no timer pending it blocks on real I/O as usual, so a thread's
`call_soon_threadsafe` still wakes it.

    @virtual_time
    async def test_the_watchdog_fires_after_exactly_its_timeout(): ...
"""

from __future__ import annotations

import asyncio
import functools
import selectors
from typing import Any, Callable, Coroutine, TypeVar

__all__ = ["VirtualTimeLoop", "virtual_time"]

T = TypeVar("T")


class _JumpingSelector(selectors.DefaultSelector):
    """A real selector that, asked to wait for a timer with nothing to read, moves the loop's clock instead."""

    def __init__(self, advance: Callable[[float], None]) -> None:
        super().__init__()
        self._advance = advance

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)  # real I/O that is already there comes first
        if ready or timeout is not None and timeout <= 0:
            return ready
        if timeout is None:  # no timer pending: only real I/O can wake the loop
            return super().select(None)
        self._advance(timeout)  # every task waits: the next timer is due now
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose `time()` starts at 0 and moves only when every task waits (to the next timer)."""

    def __init__(self) -> None:
        self._virtual_now = 0.0
        super().__init__(selector=_JumpingSelector(self._advance))

    def _advance(self, seconds: float) -> None:
        self._virtual_now += seconds

    def time(self) -> float:
        """Seconds of virtual time since the loop was made."""
        return self._virtual_now


def virtual_time(test: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., T]:
    """Run an async test on its own VirtualTimeLoop (a plain function to pytest, so no asyncio plugin is involved)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> T:
        with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
            return runner.run(test(*args, **kwargs))

    return run
