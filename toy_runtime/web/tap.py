"""Where the console listens: the audit sink (turns, events, faults, metrics), the turn runner's items (speech),
the signal bus (session state, volume) and the microphone (its level).

Every tap is a cheap, non-blocking hand-off to the hub; nothing here can slow the voice path down.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any, AsyncIterator

from firmware_bridge.ratelog import LimitedLog

from ..audit import redact
from ..language import has_cjk
from ..session.items import Speech, TurnItem
from ..signals import SignalBus, StateSignal, VolumeSignal
from .hub import ConsoleHub

__all__ = ["AuditTap", "MeteredSource", "SpeechTap", "pump_signals"]

# audit kinds a page shows (the rest stay in the audit log): turns, events, faults, corrections, controls
_SHOWN = ("turn.", "event.", "llm.fault", "voice.turn", "voice.barge_in", "voice.session_", "speech.hidden",
          "remote.", "console.", "runtime.", "audio.device", "mqtt.", "host.", "batch.aborted")
_HIDDEN = ("turn.follow_up",)  # raw search payloads: large, and the page shows the follow-up's speech instead

log = logging.getLogger(__name__)
# a tap runs on every audit record and spoken segment: a fault that repeats must not flood the journal
_faults = LimitedLog(log, "console tap fault", burst=3)


class AuditTap:
    """An audit sink (teed after the real one) that sends the records a page shows, redacted, to the hub."""

    def __init__(self, hub: ConsoleHub, speech: "SpeechTap | None" = None) -> None:
        self.hub = hub
        self.speech = speech

    def record(self, kind: str, **fields: Any) -> None:
        try:
            if kind == "turn.started" and self.speech is not None:
                self.speech.started(str(fields.get("turn_id")))
            if not kind.startswith(_SHOWN) or kind.startswith(_HIDDEN):
                return
            record = redact({"kind": kind, "ts": time.time(), **fields})
            self.hub.publish({"type": "audit", "record": _jsonable(record)})
        except Exception as exc:  # noqa: BLE001 - a console fault must never fail the audit path or a turn
            self.hub.failures += 1
            _faults.warning("console: the %s record could not be shown: %s: %s", kind, type(exc).__name__, exc)


class SpeechTap:
    """The turn runner's observer: each spoken segment, with its turn and ms since the turn started."""

    def __init__(self, hub: ConsoleHub) -> None:
        self.hub = hub
        self._started: dict[str, float] = {}

    def started(self, turn_id: str) -> None:
        """The turn began now (its `turn.started` record): speech times count from here."""
        self._started[turn_id] = time.perf_counter()
        if len(self._started) > 64:
            del self._started[next(iter(self._started))]

    def __call__(self, turn_id: str, item: TurnItem) -> None:
        if not isinstance(item, Speech):
            return  # events and the turn's end come from the audit records, with more detail
        try:
            t0 = self._started.get(turn_id, item.at)
            self.hub.publish({"type": "speech", "turn_id": turn_id, "answer": item.answer, "kind": item.kind,
                              "text": item.text, "ms": round((item.at - t0) * 1000, 1),
                              "sources": [dict(s) for s in item.sources]})
            # the toy answers in the child's language: what it says shows which one the turn is in
            self.hub.update_status(language="zh" if has_cjk(item.text) else "en")
        except Exception as exc:  # noqa: BLE001 - a console fault must never fail a turn
            self.hub.failures += 1
            _faults.warning("console: a spoken segment could not be shown: %s: %s", type(exc).__name__, exc)


async def pump_signals(signals: SignalBus, hub: ConsoleHub) -> None:
    """Session states and volume changes → the status snapshot (runs until cancelled)."""
    for signal in list(signals.last.values()):
        _apply(signal, hub)
    queue = signals.subscribe()
    try:
        while True:
            _apply(await queue.get(), hub)
    finally:
        signals.unsubscribe(queue)


def _apply(signal, hub: ConsoleHub) -> None:
    if isinstance(signal, StateSignal):
        hub.update_status(state=signal.state.value, session_id=signal.session_id)
    elif isinstance(signal, VolumeSignal):
        hub.update_status(volume={"level": signal.level, "muted": signal.muted})


class MeteredSource:
    """An AudioSource that passes frames through and sends the mic level to the pages while one is open: the peak
    RMS (dBFS) of every third frame over each `every_s`, only when it moved by `min_change_db` (a steady room sends
    nothing). Measured on `run`: an RMS of every frame with np.mean cost ~0.6 % of a core; this costs nothing
    measurable (docs/console.md). Everything else is the wrapped source's."""

    def __init__(self, source, hub: ConsoleHub, *, every_s: float = 0.25, min_change_db: float = 1.0,
                 sample_every: int = 3) -> None:
        self._source = source
        self._sample_every = sample_every  # frames: a 60 ms sampling is plenty for a meter, and a third the cost
        self._hub = hub
        self._every_s = every_s
        self._min_change_db = min_change_db

    def __getattr__(self, name: str):
        return getattr(self._source, name)

    def __aiter__(self) -> AsyncIterator:
        return self._frames()

    async def _frames(self):
        import numpy as np

        peak, due, shown, n = 0.0, 0.0, None, 0
        async for frame in self._source:
            n += 1
            if self._hub.has_clients and n % self._sample_every == 0:
                samples = np.frombuffer(frame.pcm, dtype=np.int16).astype(np.float32)
                if samples.size:
                    peak = max(peak, float(np.sqrt(np.dot(samples, samples) / samples.size)))
                now = time.monotonic()
                if now >= due:
                    dbfs = round(max(20 * math.log10(peak / 32768), -96.0), 1) if peak > 0 else -96.0
                    if shown is None or abs(dbfs - shown) >= self._min_change_db:
                        self._hub.publish({"type": "level", "dbfs": dbfs}, keep=False)
                        shown = dbfs
                    peak, due = 0.0, now + self._every_s
            elif not self._hub.has_clients:
                shown = None  # the next page gets a level at once
            yield frame


def _jsonable(value: Any) -> Any:
    """Audit fields as JSON values (enums, tuples, paths and other objects become strings/lists)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return str(value)


async def cancel_quietly(task: asyncio.Task | None) -> None:
    """Cancel a console task and wait for it."""
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
