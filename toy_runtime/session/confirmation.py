"""Events held for the child's yes: asked in one turn, resolved by the NEXT turn's answer, never later.

The kernel answers a definition with `requires_confirmation` by NEEDS_CONFIRMATION and a question (it never runs
it). This module remembers those events for one turn. The next utterance decides (`answers.read_answer`):

- yes → each held event runs in that turn, with exactly the arguments the child was asked about (the kernel does
  not resolve them again nor ask twice); no model call;
- no → nothing runs; the child hears that it was not done; no model call;
- anything else (a new topic), the session ending, or an answer after `timeout_s` → the held events are dropped
  unrun. A late yes is told so instead of being sent to a model that might promise the action.

Every step is audited (`confirmation.asked` / `.confirmed` / `.cancelled` with the reason). Generic: it reads only
result statuses and definition metadata, never an event name.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ..audit import AuditKind, AuditSink
from ..events import EventRegistry, EventRequest, EventResult, EventStatus, SourceProtocol
from .answers import read_answer
from .items import Answer, Speech, SpeechKind

log = logging.getLogger(__name__)

Say = Callable[[Speech], None]

DECLINED_LINES = {"en": "Okay, I won't do that.", "zh": "好的，那就不做了。"}
EXPIRED_LINES = {"en": "That was a while ago, so I didn't do it. Please ask me again.",
                 "zh": "刚才那件事等太久了，我没有做。请再说一次吧。"}
# after a confirmed event ran and nothing else was said (its definition has no line of its own)
DONE_LINES = {"en": "Okay, done.", "zh": "好了，做好了。"}
DEFAULT_TIMEOUT_S = 30.0


def _line(lines: Mapping[str, str], locale: str) -> str:
    return lines.get(locale, lines["en"])


@dataclass(frozen=True)
class PendingEvent:
    """One event held for the child's answer: what it would run, and when it was asked (monotonic seconds)."""

    event_id: str
    name: str
    arguments: Mapping[str, Any]
    asked_in: str  # the turn id that asked
    asked_at: float


@dataclass(frozen=True)
class ConfirmationReply:
    """What the next turn does with the held events: run them ("yes") or say why not ("no", "expired")."""

    answer: str  # "yes" | "no" | "expired"
    events: tuple[PendingEvent, ...]

    def act(self, run, turn_id: str, say: Say, locale: str) -> None:
        """Add the confirmed events to this turn's batch, or say that nothing was done."""
        if self.answer == "yes":
            for event in self.events:
                # no model is involved: the child's yes settles it, like the gate's clear words do
                request = EventRequest(name=event.name, turn_id=turn_id, source=SourceProtocol.OFFLINE_GATE,
                                       arguments=dict(event.arguments), event_id=event.event_id)
                run.add(request, confirmed=event.arguments)
            return
        say(Speech(Answer.FIRST, _line(DECLINED_LINES if self.answer == "no" else EXPIRED_LINES, locale),
                   kind=SpeechKind.CONFIRMATION))


class Confirmations:
    """The held events of one conversation (the last asking turn's only)."""

    def __init__(self, registry: EventRegistry, audit: AuditSink, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.registry = registry
        self.audit = audit
        self.timeout_s = timeout_s
        self._held: tuple[PendingEvent, ...] = ()

    @property
    def held(self) -> tuple[PendingEvent, ...]:
        """Events waiting for the child's answer."""
        return self._held

    def note(self, results: Sequence[EventResult], turn_id: str, now: float) -> None:
        """After a turn: hold the events it asked about (anything held before was settled by this turn already)."""
        held = []
        for result in results:
            if result.status is EventStatus.NEEDS_CONFIRMATION:
                held.append(PendingEvent(result.event_id, result.name, dict(result.arguments), turn_id, now))
                self.audit.record(AuditKind.CONFIRMATION_ASKED, turn_id=turn_id, event_id=result.event_id,
                                  name=result.name, arguments=dict(result.arguments), question=result.question)
        self._held = tuple(held)

    def take(self, utterance: str, turn_id: str, now: float) -> ConfirmationReply | None:
        """The child's next words settle what is held. None: nothing was held, or it was dropped (a new topic,
        or too late and not an answer) and the turn goes on as usual."""
        held, self._held = self._held, ()
        if not held:
            return None
        answer = read_answer(utterance)
        if now - held[0].asked_at > self.timeout_s:
            self._cancel(held, "expired", turn_id)
            return ConfirmationReply("expired" if answer == "yes" else "no", held) if answer else None
        if answer is None:
            self._cancel(held, "new_topic", turn_id)
            return None
        if answer == "no":
            self._cancel(held, "declined", turn_id)
            return ConfirmationReply("no", held)
        for event in held:
            self.audit.record(AuditKind.CONFIRMATION_CONFIRMED, turn_id=turn_id, event_id=event.event_id,
                              name=event.name, arguments=dict(event.arguments), asked_in=event.asked_in)
        return ConfirmationReply("yes", held)

    def cancel(self, reason: str, turn_id: str | None = None) -> None:
        """Drop whatever is held (the session ended)."""
        held, self._held = self._held, ()
        self._cancel(held, reason, turn_id)

    def say_done(self, results: Sequence[EventResult], spoken: Sequence[Speech], say: Say, locale: str) -> None:
        """A confirmed event ran and nothing was said about it: say so (its gate line, else a plain "done")."""
        if any(s.kind != "holding" for s in spoken):
            return
        for result in results:
            if result.status is EventStatus.SUCCEEDED:
                definition = self.registry.lookup(result.name)
                line = None
                if definition is not None and definition.gate_reply is not None:
                    try:
                        line = definition.gate_reply(result.arguments, {"locale": locale})
                    except Exception:  # a broken template still leaves the plain line
                        log.warning("the gate reply of %s failed; saying the plain line", definition.name,
                                    exc_info=True)
                        line = None
                say(Speech(Answer.SECOND, line or _line(DONE_LINES, locale), kind=SpeechKind.CONFIRMATION))
                return

    def _cancel(self, held: Sequence[PendingEvent], reason: str, turn_id: str | None) -> None:
        for event in held:
            self.audit.record(AuditKind.CONFIRMATION_CANCELLED, turn_id=turn_id, event_id=event.event_id,
                              name=event.name, reason=reason, asked_in=event.asked_in)

