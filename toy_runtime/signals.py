"""The runtime's outward event stream: session states and device signals that others (MQTT, UI) mirror.

Publishing never blocks: each subscriber has a bounded queue; when it is full the oldest item is dropped and counted.
"""

from __future__ import annotations

import asyncio
import enum
import time
from dataclasses import dataclass, field
from typing import Union


class SessionState(enum.StrEnum):
    """Audio/agent session states (mirrored to the firmware's LEDs)."""

    IDLE = "idle"
    LISTENING = "listening"
    THINKING = "thinking"
    SPEAKING = "speaking"
    CLOSED = "closed"


@dataclass(frozen=True)
class StateSignal:
    """The session moved to `state`."""

    state: SessionState
    session_id: str | None = None
    ts: float = field(default_factory=time.time)


@dataclass(frozen=True)
class VolumeSignal:
    """The device volume after a change (read back from the mixer)."""

    level: int
    muted: bool
    event_id: str | None = None
    ts: float = field(default_factory=time.time)


Signal = Union[StateSignal, VolumeSignal]


class SignalBus:
    """Fan-out of signals to bounded subscriber queues."""

    def __init__(self, queue_size: int = 64) -> None:
        self._queue_size = queue_size
        self._subscribers: list[asyncio.Queue[Signal]] = []
        self.dropped = 0
        self.last: dict[type, Signal] = {}

    def subscribe(self) -> asyncio.Queue[Signal]:
        queue: asyncio.Queue[Signal] = asyncio.Queue(self._queue_size)
        self._subscribers.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Signal]) -> None:
        if queue in self._subscribers:
            self._subscribers.remove(queue)

    def publish(self, signal: Signal) -> None:
        self.last[type(signal)] = signal
        for queue in self._subscribers:
            if queue.full():
                queue.get_nowait()
                self.dropped += 1
            queue.put_nowait(signal)
