"""The visible conversation history kept for ChatAgent (no tool schemas, tool calls or tool-role messages)."""

from __future__ import annotations

import uuid
from collections import deque
from typing import Any


class Conversation:
    """One dialogue session: its id, bounded visible history, and whether it was terminated."""

    def __init__(self, *, history_turns: int = 6, session_id: str | None = None) -> None:
        self.session_id = session_id or "sess_" + uuid.uuid4().hex[:12]
        # one user and one assistant message per turn (event results are never stored: they are untrusted text)
        self._history: deque[dict[str, Any]] = deque(maxlen=max(1, history_turns) * 2)
        self.history_turns = history_turns
        self.terminated = False
        self.turns = 0

    @property
    def messages(self) -> list[dict[str, Any]]:
        """History as Chat Completions messages (role/content only) for ChatAgent: an assistant message carries its
        turn's `protocol` text after what was said (dual_agent's event block), never the results."""
        if not self.history_turns:
            return []
        return [{"role": m["role"], "content": m["content"] + m.get("protocol", "")} for m in self._history]

    def add(self, role: str, content: str, *, protocol: str = "") -> None:
        """Append one message; `protocol` is the unspoken part ChatAgent wrote (kept out of the EventAgent slice)."""
        if content:
            self._history.append({"role": role, "content": content, **({"protocol": protocol} if protocol else {})})

    def slice_for_events(self, n: int = 4) -> list[dict[str, str]]:
        """The smallest useful slice for EventAgent and resolvers."""
        return [{"role": m["role"], "content": m["content"]} for m in list(self._history)[-n:]]

    def next_turn_id(self) -> str:
        self.turns += 1
        return f"{self.session_id}.t{self.turns}"
