"""What a doctor check returns, and the helper that runs blocking work for it without ever pinning the process."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import asdict, dataclass
from typing import Any, Callable, TypeVar

__all__ = ["CheckResult", "Verdict", "fail", "fmt_ms", "in_thread", "ok", "skip", "warn"]

T = TypeVar("T")


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check. `fix` says what to do about a WARN/FAIL; `ms` is how long the check took."""

    name: str
    status: str  # OK | WARN | FAIL | SKIP
    detail: str
    fix: str | None = None
    ms: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    """A check function's answer; the runner adds the name and the time taken."""

    status: str
    detail: str
    fix: str | None = None


def ok(detail: str) -> Verdict:
    """All good."""
    return Verdict("OK", detail)


def warn(detail: str, fix: str) -> Verdict:
    """Works, but not as it should; does not fail the doctor."""
    return Verdict("WARN", detail, fix)


def fail(detail: str, fix: str) -> Verdict:
    """The toy cannot run like this: the doctor exits 1."""
    return Verdict("FAIL", detail, fix)


def skip(detail: str) -> Verdict:
    """Not applicable with this configuration."""
    return Verdict("SKIP", detail)


def fmt_ms(ms: float | None) -> str:
    """820 ms / 12.3 s."""
    if ms is None:
        return "–"
    return f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


async def in_thread(fn: Callable[..., T], *args: Any, name: str) -> T:
    """`fn(*args)` in a daemon thread. Unlike asyncio.to_thread, a call that never returns (a model load stuck on a
    dead NFS mount) cannot keep the process alive after its check timed out: the doctor must always exit."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(succeeded: bool, value: Any) -> None:
        if future.done():  # the check timed out (the future was cancelled) meanwhile
            return
        if succeeded:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> None:
        outcome: tuple[bool, Any]  # (True, the result) or (False, the exception)
        try:
            outcome = (True, fn(*args))
        except Exception as exc:
            outcome = (False, exc)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits for this any more
            loop.call_soon_threadsafe(deliver, *outcome)

    threading.Thread(target=work, name=name, daemon=True).start()
    return await future
