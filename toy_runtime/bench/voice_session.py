"""A mixed session for the voice bench: plain answers, web searches and reminders, as a child's session has them.

`bench voice --session mixed` uses it to measure the runtime's memory *during use* (issue 14: RSS over a 20-turn
session with search and reminders), not only once loaded: every search turn runs the real search plugin against a
SearxNG-like server on loopback and a follow-up answer; every reminder turn runs the event kernel, EventAgent (the
words carry no time the model must not fill) and the calendar store. The scripted model answers each request by its
kind: a chat turn by the turn's kind, an EventAgent call with the one tool it is offered, a follow-up with an answer.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from ..testing.scripted_llm import Reply
from .oracle import is_follow_up

__all__ = ["MIXED_PHRASES", "MixedSessionReplies", "StampedReplies"]

# (what the child says, what kind of turn it is); the bench cycles through them. The reminders say their time (the
# child's words decide it, never the model) in words the embedded recognizer gets right.
MIXED_PHRASES: tuple[tuple[str, str], ...] = (
    ("what is the weather today", "search"),
    ("tell me a story", "plain"),
    ("set a reminder for seven o'clock", "reminder"),
    ("how far away is the moon", "search"),
    ("can you sing a song", "plain"),
    ("remind me to brush my teeth at eight o'clock", "reminder"),
    ("what do cats like to eat", "search"),
    ("tell me a joke", "plain"),
    ("set a reminder for nine o'clock", "reminder"),
    ("what color is the sky", "plain"),
)
_BLOCK = "<agent_events>{}</agent_events>"
_ANSWERS = {
    "plain": "Sure! Here is a short answer for you.",
    "search": "Let me look that up for you.",
    "reminder": "Okay!",
}
_FOLLOW_UP = "I looked it up. Here is what I found, in a few short words."
_EVENTS = {"search": "knowledge.web.search", "reminder": "calendar.schedule.create"}


class StampedReplies:
    """The scripted server's responder: one fixed reply, and the CLOCK_MONOTONIC arrival of every request."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.arrivals: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            self.arrivals.append(time.monotonic())
        return self._answer(request)

    def _answer(self, request: dict[str, Any]) -> Reply:
        return self.reply

    def first_after(self, since: float, until: float | None) -> float | None:
        """The first request that arrived in [since, until)."""
        with self._lock:
            return next((t for t in self.arrivals if t >= since and (until is None or t < until)), None)


class MixedSessionReplies(StampedReplies):
    """The scripted server's responder for a mixed session: each request answered by its kind."""

    def __init__(self, kinds: list[str], *, delay_s: float = 0.0) -> None:
        super().__init__(Reply(text=_ANSWERS["plain"], delay_s=delay_s))
        self.kinds = kinds  # the kind of each turn, in order
        self.requests_by_kind = {"chat": 0, "event_agent": 0, "follow_up": 0}

    def _answer(self, request: dict[str, Any]) -> Reply:
        delay_s = self.reply.delay_s
        with self._lock:  # the server answers on several threads
            if request.get("tool_choice") not in (None, "auto", "none") and request.get("tools"):
                self.requests_by_kind["event_agent"] += 1
                return _event_agent_reply(request)
            if is_follow_up(request.get("messages", [])):
                self.requests_by_kind["follow_up"] += 1
                return Reply(text=_FOLLOW_UP, delay_s=delay_s)
            turn = self.requests_by_kind["chat"]
            self.requests_by_kind["chat"] += 1
        kind = self.kinds[turn % len(self.kinds)] if self.kinds else "plain"
        event = _EVENTS.get(kind)
        return Reply(text=_ANSWERS[kind] + (_BLOCK.format(event) if event else ""), delay_s=delay_s)


def _event_agent_reply(request: dict[str, Any]) -> Reply:
    tool = request["tools"][0]["function"]["name"]
    if tool == "add_schedule":
        tomorrow = (datetime.now(timezone.utc) + timedelta(days=1)).replace(hour=17, minute=0, second=0,
                                                                           microsecond=0)
        args = {"title": "the thing you asked", "start_at": tomorrow.isoformat(), "timezone": "UTC"}
    elif tool == "web_search":
        args = {"query": "what the child asked"}
    else:
        args = {}
    return Reply(tool_calls=[(tool, json.dumps(args))])
