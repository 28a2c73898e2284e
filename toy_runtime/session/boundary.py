"""The dialogue-session boundary that `session.terminate` acts on."""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping


class SessionBoundary:
    """Ends the current dialogue session. Listeners (the audio session, the MQTT mirror) are told once per session.

    The session is marked ending here; the runtime closes audio only after the farewell has been played.
    """

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.ended: dict[str, dict[str, Any]] = {}  # session id → first end record (idempotent by session)
        self._listeners: list[Callable[[str, str | None], None]] = []

    def bind(self, session_id: str) -> None:
        """Point the boundary at the session now running."""
        self.session_id = session_id

    def on_end(self, listener: Callable[[str, str | None], None]) -> None:
        self._listeners.append(listener)

    async def end_session(self, reason: str | None, event_id: str) -> Mapping[str, Any]:
        session = self.session_id or "default"
        if session in self.ended:
            return {**self.ended[session], "already_ended": True}
        record = {"session_id": session, "ended": True, "reason": reason, "event_id": event_id, "at": time.time()}
        self.ended[session] = record
        while len(self.ended) > 64:  # only recent sessions can see a retransmitted terminate
            del self.ended[next(iter(self.ended))]
        for listener in self._listeners:
            listener(session, reason)
        return record
