"""The console's own accept loop: a cap on open connections, the untrusted ones closed first, and no log flood when
the process runs out of file descriptors.

asyncio's server accepts for us otherwise, and a neighbour who opens a thousand connections and sends half a header
on each keeps every one (aiohttp waits for the header forever) until the descriptors run out; asyncio then logs a
traceback on every failed accept. Here:
- at most `max_connections` are open; one more closes the oldest connection that has not sent a whole request, else
  the oldest one that was refused, else (all trusted) the newcomer;
- `EMFILE`/`ENFILE` (and the kernel's buffer shortages) on accept: close a few untrusted connections to free
  descriptors, wait (backing off up to 2 s) and say so in one line per minute;
- the header read timeout itself is aiohttp's idle timeout, which also runs from the moment a connection opens
  (`server.py`).
A connection is trusted once a request on it passed the console's access rules (`server.py` marks it).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import time
from dataclasses import dataclass
from typing import Callable, cast

from .log_budget import LogBudget

__all__ = ["ConsoleListener"]

log = logging.getLogger("toy_runtime.web")

BACKLOG = 128
OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
GONE_BEFORE_ACCEPT = {errno.ECONNABORTED, errno.EPROTO, errno.ECONNRESET, errno.EPERM}
FREE_ON_EMFILE = 8  # untrusted connections closed per failed accept, so the owner's can be taken
MAX_BACKOFF_S = 2.0


@dataclass(eq=False)
class _Connection:
    transport: asyncio.Transport
    opened: float
    requests: int = 0
    trusted: bool = False

    def eviction_rank(self) -> tuple[int, float] | None:
        """Lower goes first: never sent a whole request, then refused; trusted ones are never evicted."""
        if self.trusted:
            return None
        return (0 if self.requests == 0 else 1, self.opened)


class ConsoleListener:
    """Binds HOST:PORT and hands accepted sockets to `protocol_factory` (aiohttp's server) within the cap."""

    def __init__(self, protocol_factory: Callable[[], asyncio.Protocol], *, host: str, port: int,
                 max_connections: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.protocol_factory = protocol_factory
        self.host = host
        self.port = port
        self.max_connections = max_connections
        self._clock = clock
        self._sockets: list[socket.socket] = []
        self._tasks: list[asyncio.Task] = []
        self._open: dict[asyncio.BaseTransport, _Connection] = {}
        self._budget = LogBudget(burst=1)
        self.evicted = 0
        self.out_of_descriptors = 0

    async def start(self) -> None:
        """Bind every address HOST resolves to (OSError when one cannot be bound) and start accepting."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        try:
            for family, _, _, _, address in dict.fromkeys((i[0], 0, 0, "", i[4][:2]) for i in infos):
                port = self.port or (self._sockets[0].getsockname()[1] if self._sockets else 0)
                sock = socket.create_server((address[0], port), family=family, backlog=BACKLOG)
                sock.setblocking(False)
                self._sockets.append(sock)
        except OSError:
            self._close_sockets()
            raise
        self.port = self._sockets[0].getsockname()[1]
        for n, sock in enumerate(self._sockets):
            self._tasks.append(asyncio.create_task(self._accept_loop(sock), name=f"console:accept:{n}"))

    async def aclose(self) -> None:
        """Stop accepting (the open connections are aiohttp's to close)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await asyncio.wait_for(task, 5)
            except (asyncio.CancelledError, TimeoutError):
                pass
        self._tasks.clear()
        self._close_sockets()
        held = self._budget.take_held(all_windows=True)
        if held:
            log.warning("console: %d more lines about failed accepts not written", held)

    def _close_sockets(self) -> None:
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()

    # -- what the server tells us ------------------------------------------------------------------

    def note_request(self, transport: asyncio.BaseTransport | None, *, trusted: bool) -> None:
        """A whole request arrived on `transport`; `trusted` once it passed the access rules."""
        connection = self._open.get(transport) if transport is not None else None
        if connection is not None:
            connection.requests += 1
            connection.trusted = connection.trusted or trusted

    @property
    def open_connections(self) -> int:
        self._forget_closed()
        return len(self._open)

    # -- accepting ---------------------------------------------------------------------------------

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        backoff = 0.0
        while True:
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError as exc:
                if exc.errno in GONE_BEFORE_ACCEPT:
                    continue
                freed = 0
                if exc.errno in OUT_OF_RESOURCES:
                    self.out_of_descriptors += 1
                    freed = self._evict(FREE_ON_EMFILE)
                backoff = min(max(backoff * 2, 0.05), MAX_BACKOFF_S)
                self._say(f"console: cannot accept a connection "
                          f"({errno.errorcode.get(cast(int, exc.errno), exc.errno)}: "
                          f"{exc.strerror}); closed {freed} unauthenticated, pausing up to {MAX_BACKOFF_S:g} s")
                await asyncio.sleep(backoff)
                continue
            backoff = 0.0
            await self._admit(loop, conn)

    async def _admit(self, loop: asyncio.AbstractEventLoop, conn: socket.socket) -> None:
        self._forget_closed()
        if len(self._open) >= self.max_connections and not self._evict(1):
            conn.close()  # every open connection is trusted: the newcomer waits for one of them to end
            self._say(f"console: {len(self._open)} trusted connections open (web.max_connections); "
                      "a new one was closed")
            return
        try:
            transport, _ = await loop.connect_accepted_socket(self.protocol_factory, sock=conn)
        except OSError:
            conn.close()  # the peer went away while we set it up
            return
        self._open[transport] = _Connection(transport, self._clock())

    def _evict(self, how_many: int) -> int:
        """Close up to `how_many` untrusted connections, the least proven and oldest first; how many were closed."""
        ranked = sorted((c for c in self._open.values() if c.eviction_rank() is not None),
                        key=cast("Callable[[_Connection], tuple[int, float]]", _Connection.eviction_rank))[:how_many]
        for connection in ranked:
            connection.transport.abort()  # no lingering: the descriptor is what we need back
            del self._open[connection.transport]
        self.evicted += len(ranked)
        return len(ranked)

    def _forget_closed(self) -> None:
        for transport in [t for t in self._open if t.is_closing()]:
            del self._open[transport]

    def _say(self, line: str) -> None:
        held = self._budget.take_held()
        if self._budget.allow():
            log.warning("%s%s", line, f" ({held} more such lines not written)" if held else "")
