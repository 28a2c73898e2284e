"""The offline gate: clear requests (goodbye, volume) answered and carried out without the LLM.

It serves four moments of a turn: no endpoint at all (or `gate_shortcut`), a ChatAgent call that failed in any
way, a reply whose events could not run (unknown name, unclosed block), and a turn that would otherwise be silent. Definitions opt in with `gate_match` / `gate_reply`; the gate
never names an event.
"""

from __future__ import annotations

from typing import Callable

from ..agent.llm import LLMFault
from ..events import AuditKind, AuditSink, EventRegistry, EventRequest, EventStatus, ResolveContext, SourceProtocol
from ..events import resolve_deterministic
from ..events.definition import EventDefinition
from .items import Speech

Say = Callable[[Speech], None]


class OfflineGate:
    """Deterministic answers for clear requests, run through the same kernel batch as the model's events."""

    def __init__(self, registry: EventRegistry, audit: AuditSink) -> None:
        self.registry = registry
        self.audit = audit

    def matches(self, context: ResolveContext) -> list[EventDefinition]:
        """Definitions whose `gate_match` says this utterance is a clear request for them."""
        return [d for d in self.registry if d.gate_match is not None and d.gate_match(context)]

    def _reply(self, definition: EventDefinition, context: ResolveContext) -> str | None:
        resolved = resolve_deterministic(self.registry, definition, None, context)
        if resolved.outcome == "resolved" and definition.gate_reply is not None:
            return definition.gate_reply(resolved.arguments, {"locale": context.locale})
        return None

    def answer(self, context: ResolveContext, run, turn_id: str, say: Say, offline_line: str) -> None:
        """No LLM at all: templated reply + the event for clear requests; anything else hears `offline_line`."""
        matched = self.matches(context)
        self.audit.record(AuditKind.GATE_USED, turn_id=turn_id, matched=[d.name for d in matched])
        if not matched:
            say(Speech(1, offline_line, kind="offline"))
            return
        for definition in matched:
            if (line := self._reply(definition, context)) is not None:
                say(Speech(1, line, kind="gate"))
            run.add(EventRequest(name=definition.name, turn_id=turn_id, source=SourceProtocol.OFFLINE_GATE))

    def after_fault(self, exc: LLMFault, context: ResolveContext, run, turn_id: str, say: Say,
                    spoken: list[Speech], *, fault_line: str, offline_line: str) -> str:
        """A failed ChatAgent call: clear requests are carried out and confirmed, anything else hears a line.
        Returns the turn's path: "gate" when the gate acted (or the endpoint was unreachable), else "llm"."""
        if self.step_in(context, run, turn_id, say, spoken, reason=exc.code):
            return "gate"
        replied = any(s.kind != "holding" for s in spoken)
        unreachable = exc.unreachable and not replied
        say(Speech(2 if replied else 1, offline_line if unreachable else fault_line,
                   kind="offline" if unreachable else "fault"))
        return "gate" if unreachable else "llm"

    def step_in(self, context: ResolveContext, run, turn_id: str, say: Say, spoken: list[Speech], *,
                reason: str) -> bool:
        """Carry out the clear requests the model's call did not (a fault, or events that could not run).

        An event the model's stream already dispatched is never added again (and is confirmed only when the child
        heard nothing yet); when the model's own words were spoken, a terminal event's farewell is not said a
        second time. True when the utterance matched a gate definition.
        """
        replied = any(s.kind != "holding" for s in spoken)
        answer = 2 if replied else 1
        dispatched = {slot.definition.name for slot in run.slots}
        matched = self.matches(context)
        self.audit.record(AuditKind.GATE_USED, turn_id=turn_id, matched=[d.name for d in matched], after=reason,
                          already_dispatched=sorted(dispatched))
        for definition in matched:
            if definition.name not in dispatched:
                run.add(EventRequest(name=definition.name, turn_id=turn_id, source=SourceProtocol.OFFLINE_GATE))
            elif replied:
                continue  # the model asked for it and said so
            if replied and definition.terminal:
                continue  # the model already spoke; a second goodbye would only repeat it
            if (line := self._reply(definition, context)) is not None:
                say(Speech(answer, line, kind="gate"))
        return bool(matched)

    def confirm_silent(self, results, context: ResolveContext, say: Say, fault_line: str) -> None:
        """The turn said nothing at all (e.g. a bare tool call): confirm what ran, else say the fault line."""
        lines = []
        for result in results:
            definition = self.registry.lookup(result.name)
            if result.status is EventStatus.SUCCEEDED and definition is not None and definition.gate_reply:
                lines.append(definition.gate_reply(result.arguments, {"locale": context.locale}))
        for line in dict.fromkeys(lines) or [fault_line]:
            say(Speech(1, line, kind="gate" if lines else "fault"))
