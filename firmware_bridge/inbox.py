"""The inbound side of an endpoint: bounded queues fed from paho's network thread, and the endpoint's counters."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, AsyncIterator, Generic, TypeVar

from .ratelog import LimitedLog

log = logging.getLogger("firmware_bridge")

T = TypeVar("T")


@dataclass
class EndpointStats:
    """Counters for logs and tests."""

    connects: int = 0
    resumed: int = 0  # connects where the broker still had our session and subscriptions (no SUBSCRIBE sent)
    republished: int = 0  # retained values re-published on (re)connects: once per retained topic per connection
    disconnects: int = 0
    published: int = 0  # handed to paho while connected (includes flushes)
    queued: int = 0  # non-retained publishes parked in the outbox while disconnected
    flushed: int = 0  # outbox entries sent after a reconnect
    dropped_outbox: int = 0  # oldest outbox entries dropped at the bound
    dropped_inbox: int = 0  # oldest inbound messages dropped because the consumer was slow
    malformed: int = 0  # inbound payloads that failed to parse
    ignored: int = 0  # well-formed messages that must not be acted on (e.g. a retained button)


_CLOSED = object()


class Inbox(Generic[T]):
    """A bounded asyncio queue fed from the network thread; full → the oldest item is dropped and counted."""

    def __init__(self, name: str, maxsize: int, stats: EndpointStats) -> None:
        self.name = name
        self._queue: asyncio.Queue[Any] = asyncio.Queue(maxsize)
        self._stats = stats
        self._drop_log = LimitedLog(log, f"inbox-{name}-full")  # a flood of good messages: a line per drop at most

    def put(self, item: Any) -> None:
        """Runs on the event loop thread."""
        if self._queue.full():
            self._queue.get_nowait()
            if item is not _CLOSED:
                self._stats.dropped_inbox += 1
                self._drop_log.warning("inbox %s full: dropped the oldest message", self.name)
        self._queue.put_nowait(item)

    def close(self) -> None:
        self.put(_CLOSED)

    async def get(self) -> T:
        """The next item; raises EOFError once the endpoint stopped."""
        item = await self._queue.get()
        if item is _CLOSED:
            self._queue.put_nowait(_CLOSED)  # let every other reader end too
            raise EOFError(self.name)
        return item

    async def __aiter__(self) -> AsyncIterator[T]:
        while True:
            try:
                yield await self.get()
            except EOFError:
                return
