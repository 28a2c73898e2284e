"""The offline gate: clear requests (goodbye, volume, and compounds of them) answered and carried out without the LLM.

It serves five moments of a turn: no endpoint at all (or `gate_shortcut`), a ChatAgent call that failed in any
way, a model that sent no first token within `[llm] gate_first_token_s` while the whole utterance is clear requests,
a reply whose events could not run (unknown name, unclosed block), and a turn that would otherwise be silent.
Definitions opt in with `gate_match` / `gate_reply`; the gate never names an event.

A compound ("mute and bye", "把声音调小然后再见") is clear only when every clause (`compound.clauses`) is matched by a
definition's `gate_match` on its own and resolves completely, and its arguments read the same from the whole
utterance; anything else in it ("and tell me a story") leaves the whole utterance to the model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Collection, Mapping, Sequence

from ..agent.llm import LLMFault
from ..audit import AuditKind, AuditSink
from ..events import EventRegistry, EventRequest, EventResult, EventStatus, ResolveContext, SourceProtocol
from ..events import resolve_deterministic
from ..events.definition import EventDefinition
from .compound import MAX_CLAUSES, clauses
from .items import Answer, Speech, SpeechKind
from .turn_state import Turn, TurnPath


@dataclass(frozen=True)
class GateStep:
    """One clear request the gate can carry out: its definition and, for a clause of a compound, the arguments that
    clause resolved to (proposed to the kernel, whose resolver still reads the whole utterance first)."""

    definition: EventDefinition
    arguments: Mapping[str, Any] | None = None


class OfflineGate:
    """Deterministic answers for clear requests, run through the same kernel batch as the model's events."""

    def __init__(self, registry: EventRegistry, audit: AuditSink) -> None:
        self.registry = registry
        self.audit = audit

    def matches(self, context: ResolveContext) -> list[EventDefinition]:
        """Definitions of the clear requests in this utterance (all of it, or every clause of a compound)."""
        return [step.definition for step in self.plan(context)]

    def plan(self, context: ResolveContext) -> list[GateStep]:
        """What the gate would carry out: one step per definition when every clause of a compound is a clear
        request, else the definitions whose `gate_match` says the whole utterance is a clear request for them.

        The compound is read first: "louder please, goodbye" is a volume request to a `gate_match` that reads the
        whole utterance, and the goodbye would be lost."""
        parts = clauses(context.utterance)
        if 2 <= len(parts) <= MAX_CLAUSES and (steps := self._compound(parts, context)):
            return steps
        return [GateStep(d) for d in self.registry if d.gate_match is not None and d.gate_match(context)]

    def covers(self, context: ResolveContext) -> bool:
        """True when the utterance is nothing but clear requests: one clause the gate matches whole, or a compound
        whose every clause is one. ("mute, what is a whale" is matched whole by the volume's `gate_match` after a
        fault, but it is not covered: a stalled model is still waited for, the question is the model's.)"""
        parts = clauses(context.utterance)
        if len(parts) == 1:
            return bool(self.plan(context))
        return 2 <= len(parts) <= MAX_CLAUSES and bool(self._compound(parts, context))

    def _compound(self, parts: list[str], context: ResolveContext) -> list[GateStep]:
        """One step per definition, in the order the clauses ask; empty unless every clause is a clear request."""
        steps: dict[str, GateStep] = {}
        for part in parts:
            clause = replace(context, utterance=part)
            matched = [d for d in self.registry if d.gate_match is not None and d.gate_match(clause)]
            if not matched:
                return []  # one unclear clause makes the whole request the model's
            for definition in matched:
                step = self._clause_step(definition, clause, context)
                if step is None or steps.get(definition.name, step) != step:
                    return []  # unresolved, or two clauses asking the same thing differently ("mute and louder")
                steps[definition.name] = step
        return list(steps.values())

    def _clause_step(self, definition: EventDefinition, clause: ResolveContext,
                     whole: ResolveContext) -> GateStep | None:
        """The clause's resolved arguments, when reading them back with the whole utterance gives the same: the
        kernel resolves with the whole utterance, and the line the gate says must be what runs."""
        resolved = resolve_deterministic(self.registry, definition, None, clause)
        if resolved.outcome != "resolved":
            return None
        arguments = dict(resolved.arguments)
        again = resolve_deterministic(self.registry, definition, arguments or None, whole)
        if again.outcome != "resolved" or dict(again.arguments) != arguments:
            return None
        return GateStep(definition, arguments)

    def _request(self, step: GateStep, turn_id: str) -> EventRequest:
        return EventRequest(name=step.definition.name, turn_id=turn_id, source=SourceProtocol.OFFLINE_GATE,
                            arguments=dict(step.arguments) if step.arguments else None)

    def _reply(self, step: GateStep, context: ResolveContext) -> str | None:
        definition = step.definition
        if definition.requires_confirmation:
            return None  # the kernel asks first: a templated "okay, doing it" would promise what may never run
        resolved = resolve_deterministic(self.registry, definition, step.arguments or None, context)
        if resolved.outcome == "resolved" and definition.gate_reply is not None:
            return definition.gate_reply(resolved.arguments, {"locale": context.locale})
        return None

    def answer(self, turn: Turn, offline_line: str) -> None:
        """No LLM at all: templated reply + the event for clear requests; anything else hears `offline_line`."""
        steps = self.plan(turn.context)
        self.audit.record(AuditKind.GATE_USED, turn_id=turn.turn_id, matched=[step.definition.name for step in steps])
        if not steps:
            turn.say(Speech(Answer.FIRST, offline_line, kind=SpeechKind.OFFLINE))
            return
        for step in steps:
            if (line := self._reply(step, turn.context)) is not None:
                turn.say(Speech(Answer.FIRST, line, kind=SpeechKind.GATE))
            turn.run.add(self._request(step, turn.turn_id))

    def after_fault(self, exc: LLMFault, turn: Turn, *, fault_line: str, offline_line: str) -> TurnPath:
        """A failed ChatAgent call: clear requests are carried out and confirmed, anything else hears a line.
        Returns the turn's path: GATE when the gate acted (or the endpoint was unreachable), else LLM."""
        if self.step_in(turn, reason=exc.code):
            return TurnPath.GATE
        replied = turn.replied
        unreachable = exc.unreachable and not replied
        turn.say(Speech(Answer.SECOND if replied else Answer.FIRST, offline_line if unreachable else fault_line,
                        kind=SpeechKind.OFFLINE if unreachable else SpeechKind.FAULT))
        return TurnPath.GATE if unreachable else TurnPath.LLM

    def step_in(self, turn: Turn, *, reason: str, said: Collection[str] = ()) -> bool:
        """Carry out the clear requests the model's call did not (a fault, events that could not run, or an answer
        that omitted them).

        An event the model's stream already dispatched is never added again (and is confirmed only when the child
        heard nothing yet); when the model's own words were spoken, a terminal event's farewell is not said a
        second time, nor a confirmation of what the model's words already claimed (`said`: definition names).
        True when the utterance matched a gate definition.
        """
        replied = turn.replied
        answer = Answer.SECOND if replied else Answer.FIRST
        dispatched = {slot.definition.name for slot in turn.run.slots}
        steps = self.plan(turn.context)
        self.audit.record(AuditKind.GATE_USED, turn_id=turn.turn_id, matched=[step.definition.name for step in steps],
                          after=reason, already_dispatched=sorted(dispatched))
        for step in steps:
            definition = step.definition
            if definition.name not in dispatched:
                turn.run.add(self._request(step, turn.turn_id))
            elif replied:
                continue  # the model asked for it and said so
            if replied and (definition.terminal or definition.name in said):
                continue  # the model already spoke (a goodbye, "I've lowered the volume"); saying it again repeats it
            if (line := self._reply(step, turn.context)) is not None:
                turn.say(Speech(answer, line, kind=SpeechKind.GATE))
        return bool(steps)

    def omitted(self, turn: Turn) -> bool:
        """The words are a clear request the model's answer did not mark (`step_in` would add an event)."""
        dispatched = {slot.definition.name for slot in turn.run.slots}
        return any(step.definition.name not in dispatched for step in self.plan(turn.context))

    def confirm_silent(self, turn: Turn, results: Sequence[EventResult], fault_line: str) -> None:
        """The turn said nothing at all (e.g. a bare tool call): confirm what ran, else say the fault line."""
        lines = []
        for result in results:
            definition = self.registry.lookup(result.name)
            if result.status is EventStatus.SUCCEEDED and definition is not None and definition.gate_reply:
                lines.append(definition.gate_reply(result.arguments, {"locale": turn.locale}))
        for line in dict.fromkeys(lines) or [fault_line]:
            turn.say(Speech(Answer.FIRST, line, kind=SpeechKind.GATE if lines else SpeechKind.FAULT))
