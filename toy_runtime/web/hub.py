"""Fan-out of live console messages to the connected pages.

Publishing never blocks the runtime: each page has a bounded queue and a slow page loses its oldest messages (it is
told how many, so it can say so). A page that connects late first gets the current status and the recent turns.
Publishing is safe from any thread: records made in worker threads are handed to the event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Client", "ConsoleHub"]

Message = dict[str, Any]


@dataclass(eq=False)
class Client:
    """One connected page: its bounded queue and how many messages it lost."""

    queue: asyncio.Queue[Message]
    dropped: int = 0
    peer: str = ""

    def take_dropped(self) -> int:
        """Messages lost since the last call (the page shows a gap)."""
        dropped, self.dropped = self.dropped, 0
        return dropped


@dataclass
class ConsoleHub:
    """Live messages to pages; keeps the status snapshot and the recent turn messages for late joiners."""

    queue_size: int = 256
    history: int = 400
    status: dict[str, Any] = field(default_factory=dict)
    clients: list[Client] = field(default_factory=list)
    failures: int = 0  # messages the taps could not build or hand over (never raised into the runtime)

    def __post_init__(self) -> None:
        self.recent: deque[Message] = deque(maxlen=self.history)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop the pages are served on; publishing from other threads goes through it."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

    @property
    def has_clients(self) -> bool:
        return bool(self.clients)

    def subscribe(self, peer: str = "") -> Client:
        """A new page: its queue starts with the status and the recent turn messages."""
        client = Client(asyncio.Queue(self.queue_size), peer=peer)
        self._put(client, {"type": "status", **self.status})
        # only as much history as fits behind the status: the status must never be the message that is dropped
        for message in list(self.recent)[-(self.queue_size - 1):] if self.queue_size > 1 else ():
            self._put(client, message)
        self.clients.append(client)
        return client

    def unsubscribe(self, client: Client) -> None:
        if client in self.clients:
            self.clients.remove(client)

    def close_all(self, message: Message) -> None:
        """Put a last message in every page's queue (the server ends their streams on it)."""
        for client in self.clients:
            self._put(client, message)

    def publish(self, message: Message, *, keep: bool = True) -> None:
        """Send to every page; `keep` = also replay it to pages that connect later (turn items, not levels)."""
        if self._loop is not None and threading.get_ident() != self._loop_thread:
            if not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._publish, message, keep)
        else:
            self._publish(message, keep)

    def update_status(self, **fields: Any) -> None:
        """Change part of the status snapshot and send the change."""
        self.status.update(fields)
        self.publish({"type": "status", **fields}, keep=False)

    def _publish(self, message: Message, keep: bool) -> None:
        if keep:
            self.recent.append(message)
        for client in self.clients:
            self._put(client, message)

    @staticmethod
    def _put(client: Client, message: Message) -> None:
        queue = client.queue
        if queue.full():
            queue.get_nowait()  # a slow page loses the oldest, never the runtime's time
            client.dropped += 1
        queue.put_nowait(message)
