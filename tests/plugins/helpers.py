"""Shared fixed clocks, contexts and runners for the plugin contract tests (no wall clock anywhere)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping
from zoneinfo import ZoneInfo

from toy_runtime.events import (
    EventBatch,
    EventKernel,
    EventRegistry,
    EventRequest,
    ResolveContext,
    SourceProtocol,
    resolve_deterministic,
)

SH = "Asia/Shanghai"
NY = "America/New_York"
SH_NOW = datetime(2026, 11, 30, 8, 0, tzinfo=ZoneInfo(SH))  # a Monday morning
NY_BEFORE_FALL_BACK = datetime(2026, 10, 31, 20, 0, tzinfo=ZoneInfo(NY))  # EDT; DST ends 2026-11-01 02:00
NY_BEFORE_SPRING_FORWARD = datetime(2026, 3, 7, 20, 0, tzinfo=ZoneInfo(NY))  # EST; DST starts 2026-03-08 02:00


def ctx(utterance: str = "", now: datetime = SH_NOW, tz: str = SH, **kw: Any) -> ResolveContext:
    """A fixed ResolveContext."""
    return ResolveContext(utterance=utterance, request_time=now, timezone=tz, **kw)


def resolve(registry: EventRegistry, name: str, utterance: str = "", args: Mapping[str, Any] | None = None,
            now: datetime = SH_NOW, tz: str = SH):
    """Deterministic resolution + schema validation, exactly what `events resolve` runs."""
    return resolve_deterministic(registry, registry.get(name), args, ctx(utterance, now, tz))


def request(name: str, args: Mapping[str, Any] | None = None, *, event_id: str | None = None,
            source: SourceProtocol = SourceProtocol.TEXT_EVENTS, turn: str = "t1") -> EventRequest:
    """One event request (ids are fixed when given, so replays can be tested)."""
    extra = {"event_id": event_id} if event_id else {}
    return EventRequest(name=name, turn_id=turn, source=source, arguments=args, **extra)


async def run(kernel: EventKernel, *requests: EventRequest, utterance: str = "", now: datetime = SH_NOW,
              tz: str = SH, session: str = "s1", on_result=None):
    """Run one real batch through the kernel."""
    batch = EventBatch(session_id=session, turn_id=requests[0].turn_id if requests else "t1", requests=requests)
    return await kernel.run_batch(batch, ctx(utterance, now, tz), on_result=on_result)
