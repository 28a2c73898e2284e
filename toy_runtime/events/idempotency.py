"""Idempotency keys and the store that makes a repeated key return its first result."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from typing import Any, Mapping

from .model import EventResult


def canonical_json(value: Any) -> str:
    """A stable JSON text: equal arguments give equal strings whatever their key order."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def idempotency_key(session_id: str, turn_id: str, event_id: str, name: str, arguments: Mapping[str, Any]) -> str:
    """session + turn + event id + normalized arguments → a short stable digest."""
    material = "\x1f".join((session_id, turn_id, event_id, name, canonical_json(arguments)))
    return hashlib.sha256(material.encode()).hexdigest()[:32]


class IdempotencyStore:
    """Remembers results by key (bounded, LRU) and shares in-flight executions.

    A second caller with the same key while the first is running waits for the first's result
    instead of running the side effect again.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._done: OrderedDict[str, EventResult] = OrderedDict()
        self._inflight: dict[str, asyncio.Future[EventResult]] = {}

    def get(self, key: str) -> EventResult | None:
        result = self._done.get(key)
        if result is not None:
            self._done.move_to_end(key)
        return result

    def inflight(self, key: str) -> asyncio.Future[EventResult] | None:
        return self._inflight.get(key)

    def begin(self, key: str) -> asyncio.Future[EventResult]:
        future: asyncio.Future[EventResult] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        return future

    def finish(self, key: str, result: EventResult, *, remember: bool) -> None:
        """Resolve the in-flight future; remember only results worth replaying (not timeouts)."""
        future = self._inflight.pop(key, None)
        if future is not None and not future.done():
            future.set_result(result)
        if remember:
            self._done[key] = result
            self._done.move_to_end(key)
            while len(self._done) > self._capacity:
                self._done.popitem(last=False)
