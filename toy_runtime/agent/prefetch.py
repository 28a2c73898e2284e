"""A chat request sent ahead of its turn (speculative answering), held until the turn asks for the same request.

While the toy waits to be sure the child has finished (audio/turn_end.py: a sentence it cannot judge waits the
hangover), the answer to what was said so far can already be on its way. The request goes out as the turn would
send it; its chunks are read into a buffer, and nothing else happens to them: no text is parsed, spoken or
audited, no event is detected. When the turn starts and its request is byte-for-byte the same (the child said
nothing more), `ChatClient.stream` reads this buffer and then the rest of the live stream: the provider's wait was
spent during the silence. Anything else — more words, another turn, a session that closed — cancels it, and the
provider's connection is closed: a cancelled speculation can never speak or act, because nothing ever read it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, AsyncIterator, Awaitable, Callable

log = logging.getLogger(__name__)

__all__ = ["PrefetchedStream", "request_key"]

_END = object()


def request_key(request: dict[str, Any]) -> str:
    """The identity of a request: its JSON with sorted keys (the same words, history and tools give the same)."""
    return json.dumps(request, sort_keys=True, ensure_ascii=False, default=str)


class PrefetchedStream:
    """One request streamed into a buffer by its own task, until adopted (`chunks()`) or `cancel()`ed."""

    def __init__(self, request: dict[str, Any], open_stream: Callable[[dict[str, Any]], Awaitable[Any]], *,
                 max_chunks: int = 4096, name: str = "llm:prefetch",
                 on_cancel: Callable[[str], None] | None = None) -> None:
        self.key = request_key(request)
        self.on_cancel = on_cancel  # told why, when it is cancelled unread (the owner's audit)
        self.request = request
        self.sent_at = time.perf_counter()
        self.adopted = False
        # bounded: an answer is a few hundred chunks; a runaway stream stops being read (and the turn that adopts
        # it reads on from the buffer, then waits, as it would on a slow provider)
        self._chunks: asyncio.Queue[Any] = asyncio.Queue(maxsize=max_chunks)
        self._stream: Any = None
        self._task = asyncio.create_task(self._read(open_stream), name=name)

    async def _read(self, open_stream: Callable[[dict[str, Any]], Awaitable[Any]]) -> None:
        try:
            self._stream = await open_stream(self.request)
            async for chunk in self._stream:
                await self._chunks.put(chunk)
            await self._chunks.put(_END)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to whoever adopts it, raised there as if live
            await self._chunks.put(exc)
        finally:
            if self._stream is not None and not self.adopted:
                await self._close_stream()

    async def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                await stream.close()
            except Exception as exc:  # noqa: BLE001 - closing a dead connection: nothing the turn can do about it
                log.debug("closing a prefetched stream failed: %s: %s", type(exc).__name__, exc)

    async def chunks(self) -> AsyncIterator[Any]:
        """The stream's chunks from the first, buffered ones first; a fault is raised where it happened."""
        self.adopted = True
        while True:
            item = await self._chunks.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    @property
    def first_chunk_in(self) -> bool:
        """True once at least one chunk (or the end, or a fault) is waiting."""
        return not self._chunks.empty()

    async def close(self) -> None:
        """After adoption: stop reading and close the provider's stream."""
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self._close_stream()

    async def cancel(self, reason: str) -> None:
        """Never adopted: stop it and close the connection (nothing of it was or will be read)."""
        self.adopted = False
        await self.close()
        if self.on_cancel is not None:
            self.on_cancel(reason)
