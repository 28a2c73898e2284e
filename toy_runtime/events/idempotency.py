"""Idempotency keys, the results port that remembers them, and the store that makes a repeated key return its first
result.

The key is session + turn + event id + name + normalized arguments (design §"Conflict policy": a duplicate is a
duplicate only when its normalized arguments are equivalent), so the same event id with other arguments is a new
request and runs. `ResultStore` is the port: `MemoryResultStore` here (unit tests, fakes, the fallback when the disk
fails), a durable one in adapters/ chosen by the composition root so a redelivery after a restart is still recognised.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from typing import Any, Callable, Mapping, Protocol

from .model import EventResult, EventStatus, EventTimings, ResolutionPath, ResultPolicy

Clock = Callable[[], float]  # wall-clock seconds: a remembered result must expire across restarts too


def canonical_json(value: Any) -> str:
    """A stable JSON text: equal arguments give equal strings whatever their key order."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def idempotency_key(session_id: str, turn_id: str, event_id: str, name: str, arguments: Mapping[str, Any]) -> str:
    """session + turn + event id + normalized arguments → a short stable digest."""
    material = "\x1f".join((session_id, turn_id, event_id, name, canonical_json(arguments)))
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def result_to_json(result: EventResult) -> str:
    """The stored form of a result (version 1): what a replay needs, timings included."""
    record = result.as_dict()
    record.pop("replayed", None)  # a stored result is the first one; the replay marks itself
    return canonical_json({"v": 1, "idempotency_key": result.idempotency_key, **record})


def result_from_json(text: str) -> EventResult:
    """Inverse of `result_to_json`; ValueError for anything else (a damaged or foreign row)."""
    try:
        data = json.loads(text)
        if data.get("v") != 1:
            raise ValueError(f"unsupported stored result version {data.get('v')!r}")
        return EventResult(
            event_id=str(data["event_id"]), name=str(data["name"]), status=EventStatus(data["status"]),
            policy=ResultPolicy(data["policy"]), arguments=dict(data["arguments"]),
            resolution=ResolutionPath(data["resolution"]) if data.get("resolution") else None,
            result=dict(data.get("result") or {}), error=data.get("error"), error_code=data.get("error_code"),
            question=data.get("question"), missing=tuple(data.get("missing") or ()),
            idempotency_key=data.get("idempotency_key"), fallback_used=bool(data.get("fallback_used")),
            fallback_tokens=int(data.get("fallback_tokens") or 0),
            timings=EventTimings(**{k: float(v) for k, v in (data.get("timings") or {}).items()}),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a stored event result: {exc}") from None


class ResultStore(Protocol):
    """Port: finished results by idempotency key, bounded by a time to live and a row cap.

    `get` never returns a result older than the TTL. Neither method raises for a storage fault: a durable store that
    cannot write degrades (to memory) and says so once, because a lost record must not fail the turn.
    """

    async def get(self, key: str) -> EventResult | None: ...

    async def put(self, key: str, result: EventResult) -> None: ...


class MemoryResultStore:
    """`ResultStore` in a dict: LRU-bounded to `max_rows`, entries expire `ttl_s` after they were stored."""

    def __init__(self, *, max_rows: int = 4096, ttl_s: float = 86400.0, clock: Clock = time.time) -> None:
        if max_rows < 1 or ttl_s <= 0:
            raise ValueError("max_rows must be ≥ 1 and ttl_s > 0")
        self.max_rows = max_rows
        self.ttl_s = ttl_s
        self._clock = clock
        self._rows: OrderedDict[str, tuple[float, EventResult]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rows)

    async def get(self, key: str) -> EventResult | None:
        return self.get_now(key)

    async def put(self, key: str, result: EventResult) -> None:
        self.put_now(key, result)

    def get_now(self, key: str) -> EventResult | None:
        """`get` without a suspension point (for a caller that is already off the event loop)."""
        row = self._rows.get(key)
        if row is None:
            return None
        if self._clock() - row[0] >= self.ttl_s:
            del self._rows[key]
            return None
        self._rows.move_to_end(key)
        return row[1]

    def put_now(self, key: str, result: EventResult) -> None:
        """`put` without a suspension point."""
        self._rows[key] = (self._clock(), result)
        self._rows.move_to_end(key)
        while len(self._rows) > self.max_rows:
            self._rows.popitem(last=False)


class IdempotencyStore:
    """Shares in-flight executions and remembers finished results through a `ResultStore`.

    A second caller with the same key while the first is running waits for the first's result instead of running
    the side effect again; a caller after it (in this process or, with a durable store, after a restart) gets the
    remembered result.

        earlier = await store.claim(key)      # None: this caller owns the key and must call finish()
        ...
        await store.finish(key, result, remember=True)
    """

    def __init__(self, results: ResultStore | None = None, *, capacity: int = 4096) -> None:
        self.results: ResultStore = results if results is not None else MemoryResultStore(max_rows=capacity)
        self._inflight: dict[str, asyncio.Future[EventResult]] = {}

    def inflight(self, key: str) -> asyncio.Future[EventResult] | None:
        return self._inflight.get(key)

    async def claim(self, key: str) -> EventResult | None:
        """The earlier result for `key` (finished, or shared from a running execution), else None and the caller
        now owns the key. The claim is taken before the (possibly slow) lookup, so two callers never both own it."""
        while (flight := self._inflight.get(key)) is not None:
            try:
                return await asyncio.shield(flight)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if not flight.cancelled() or (task is not None and task.cancelling()):
                    raise
                # the owner was cancelled during its lookup, before running anything: take the key over
        future: asyncio.Future[EventResult] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            earlier = await self.results.get(key)
        except BaseException:
            self._inflight.pop(key, None)
            future.cancel()
            raise
        if earlier is not None:
            self._inflight.pop(key, None)
            future.set_result(earlier)
        return earlier

    async def finish(self, key: str, result: EventResult, *, remember: bool) -> None:
        """Resolve the in-flight future; remember only results worth replaying (not timeouts).

        The key stays in flight (already resolved) until the result is stored, so nobody looks it up in between."""
        future = self._inflight.get(key)
        if future is not None and not future.done():
            future.set_result(result)
        try:
            if remember:
                await self.results.put(key, result)
        finally:
            if self._inflight.get(key) is future:
                self._inflight.pop(key, None)
