"""The conversation history kept for ChatAgent: what was said, plus the mode's own record of which events ran (a
dual_agent block, or chat_agent_tools calls with their status), never event results or tool schemas."""

from __future__ import annotations

import uuid
from collections import deque
from typing import Any, Sequence, cast


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
        """History as Chat Completions messages for ChatAgent: an assistant message carries its turn's `protocol`
        text after what was said (dual_agent's event block) or its `calls` as `tool_calls`, each answered by a
        status-only tool message (chat_agent_tools), never the results."""
        if not self.history_turns:
            return []
        out: list[dict[str, Any]] = []
        for m in self._history:
            message: dict[str, Any] = {"role": m["role"], "content": m["content"] + m.get("protocol", "")}
            calls = m.get("calls", ())
            if calls:  # content stays "" when nothing was said: llama-cpp-python refuses null (HTTP 500)
                message["tool_calls"] = [c.provider_call() for c in calls]
            out.append(message)
            out.extend(c.tool_message() for c in calls)
        return out

    def add(self, role: str, content: str, *, protocol: str = "", calls: Sequence[Any] = (),
            turn_id: str | None = None) -> None:
        """Append one message; `protocol` (text) or `calls` (objects with `provider_call()` and `tool_message()`)
        are the unspoken part ChatAgent's mode records, kept out of the EventAgent slice; `turn_id`: the turn it
        belongs to (never sent)."""
        if content or calls or protocol:  # a record alone: a cut-off turn that started events nobody heard of
            extra: dict[str, Any] = {"protocol": protocol} if protocol else {}
            if calls:
                extra["calls"] = tuple(calls)
            self._history.append({"role": role, "content": content, "turn_id": turn_id, **extra})

    @property
    def current_turn_id(self) -> str | None:
        """The id of the turn begun last (None before the first)."""
        return f"{self.session_id}.t{self.turns}" if self.turns else None

    def cut_reply(self, turn_id: str | None, heard: str) -> bool:
        """The reply of turn `turn_id`, already remembered whole, was cut off: only `heard` of it stays (with the
        record of its events, which ran). Heard nothing and ran nothing: the turn leaves the history, as a turn cut
        off before it was remembered does. False when the last message is not that turn's reply."""
        last = self._history[-1] if self._history else None
        if turn_id is None or last is None or last["role"] != "assistant" or last.get("turn_id") != turn_id:
            return False
        if heard or last.get("protocol") or last.get("calls"):
            last["content"] = heard
            return True
        self._history.pop()
        if self._history and self._history[-1]["role"] == "user" and self._history[-1].get("turn_id") == turn_id:
            self._history.pop()
        return True

    def add_announcement(self, content: str) -> None:
        """A line the toy said on its own (a reminder): part of the dialogue, so that the child's answer ("I already
        did it!") is read in context. It joins a plain assistant message just before it, so the roles keep
        alternating (some local chat templates require that); after a turn's event record (a block, tool calls) it
        is a message of its own, so it is not read as said before those events ran."""
        if not content:
            return
        last = self._history[-1] if self._history else None
        if last is not None and last["role"] == "assistant" and not last.get("protocol") and not last.get("calls"):
            last["content"] = f"{last['content']} {content}".strip()
        else:
            self._history.append({"role": "assistant", "content": content})

    def slice_for_events(self, n: int = 4) -> list[dict[str, str]]:
        """The smallest useful slice for EventAgent and resolvers."""
        return [{"role": m["role"], "content": m["content"]} for m in list(self._history)[-n:]]

    def next_turn_id(self) -> str:
        self.turns += 1
        return cast(str, self.current_turn_id)
