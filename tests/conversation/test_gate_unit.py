"""The offline gate's own decisions, without a model: what it says (answer number, kind, language), what it adds to
the batch, and when a compound is clear. Each test names the mutation (docs/testing-mutation.md) it guards.

The speech's `answer` and `kind` are not cosmetic: the promise check reads only `kind == "reply"`, the voice loop
and the transcript number answers, and a holding cue must not count as the child having heard an answer.
"""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

from toy_runtime.agent.llm import LLMFault
from toy_runtime.audit import NullAudit
from toy_runtime.events import (
    EventDefinition,
    EventRegistry,
    EventResult,
    EventStatus,
    Resolution,
    ResolveContext,
    ResultPolicy,
)
from toy_runtime.fakes import memory_ports
from toy_runtime.language import guess_locale
from toy_runtime.plugins import default_registry
from toy_runtime.session.gate import OfflineGate
from toy_runtime.session.items import Speech
from toy_runtime.session.turn_state import Turn

VOLUME, BYE = "device.volume.adjust", "session.terminate"
OFFLINE, FAULT = "I can't think right now.", "Oops, say that again?"


class Batch:
    """The part of a kernel batch the gate touches: what is already dispatched, and what it adds."""

    def __init__(self, registry: EventRegistry, dispatched=()) -> None:
        self.slots = [SimpleNamespace(definition=registry.lookup(name)) for name in dispatched]
        self.added: list[str] = []

    def add(self, request) -> None:
        self.added.append(request.name)


def ctx(utterance: str) -> ResolveContext:
    return ResolveContext(utterance=utterance, request_time=datetime(2026, 12, 3, 8, tzinfo=timezone.utc),
                          timezone="UTC", locale=guess_locale(utterance))


def turn(utterance: str, batch: Batch, out: list[Speech], heard=()) -> Turn:
    """A turn for `utterance`: what it says goes to `out`; `heard` is what was said before the gate acts."""
    return Turn("t1", ctx(utterance), batch, out.append, list(heard))  # type: ignore[arg-type]  # a Batch stand-in


def builtin_gate() -> OfflineGate:
    return OfflineGate(default_registry(memory_ports()), NullAudit())


def said(speech: list[Speech]) -> list[tuple[int, str, str]]:
    return [(s.answer, s.kind, s.text) for s in speech]


# -- answer: no model at all ----------------------------------------------------------------------------------


def test_no_model_and_unclear_words_hear_the_offline_line_as_the_first_answer():
    """Guards `Speech(1, offline_line, kind="offline")`."""
    gate, spoken = builtin_gate(), []
    gate.answer(turn("what is a whale", Batch(gate.registry), spoken), OFFLINE)
    assert said(spoken) == [(1, "offline", OFFLINE)]


def test_no_model_and_a_clear_request_hear_its_line_and_it_runs():
    """Guards `if (line := self._reply(...)) is not None` and `kind="gate"`."""
    gate, spoken = builtin_gate(), []
    batch = Batch(gate.registry)
    gate.answer(turn("mute", batch, spoken), OFFLINE)
    assert said(spoken) == [(1, "gate", "Okay, muting now.")] and batch.added == [VOLUME]


# -- after_fault: the model's call failed ----------------------------------------------------------------------


def test_a_fault_before_anything_was_said_is_the_first_answer():
    """Guards `replied = any(s.kind != "holding" ...)`, `2 if replied else 1`, the kinds and the returned path."""
    gate = builtin_gate()
    for cue in ([], [Speech(0, "Hmm, let me think.", kind="holding")]):  # a holding cue is no answer
        spoken: list[Speech] = []
        path = gate.after_fault(LLMFault("http_500", "boom"),
                                turn("tell me a story", Batch(gate.registry), spoken, cue),
                                fault_line=FAULT, offline_line=OFFLINE)
        assert said(spoken) == [(1, "fault", FAULT)] and path == "llm"
        spoken = []
        path = gate.after_fault(LLMFault("connect", "refused"),
                                turn("tell me a story", Batch(gate.registry), spoken, cue),
                                fault_line=FAULT, offline_line=OFFLINE)
        assert said(spoken) == [(1, "offline", OFFLINE)] and path == "gate"


def test_a_fault_after_the_model_spoke_is_a_second_answer_and_never_the_offline_line():
    gate, spoken = builtin_gate(), []
    heard = [Speech(1, "Once upon a time", kind="reply")]
    path = gate.after_fault(LLMFault("connect", "dropped"),
                            turn("tell me a story", Batch(gate.registry), spoken, heard),
                            fault_line=FAULT, offline_line=OFFLINE)
    assert said(spoken) == [(2, "fault", FAULT)] and path == "llm"


# -- step_in: carrying out what the model's call did not ---------------------------------------------------------


def test_step_in_numbers_its_lines_after_what_the_child_heard():
    """Guards `replied` (a holding cue is not a reply), `answer = 2 if replied else 1` and `kind="gate"`."""
    gate = builtin_gate()
    spoken: list[Speech] = []
    cue = [Speech(0, "Let me see.", kind="holding")]
    assert gate.step_in(turn("mute", Batch(gate.registry), spoken, cue), reason="stall")
    assert said(spoken) == [(1, "gate", "Okay, muting now.")]
    spoken = []
    reply = [Speech(1, "Sure thing!", kind="reply")]
    assert gate.step_in(turn("mute", Batch(gate.registry), spoken, reply), reason="omitted")
    assert said(spoken) == [(2, "gate", "Okay, muting now.")]


def test_a_goodbye_the_model_already_said_does_not_stop_the_requests_after_it():
    """Guards the `continue` past a terminal step the model's words covered (`break` lost the mute after it)."""
    gate, spoken = builtin_gate(), []
    batch = Batch(gate.registry)
    gate.step_in(turn("bye and mute", batch, spoken, [Speech(1, "Bye bye!", kind="reply")]), reason="omitted")
    assert batch.added == [BYE, VOLUME]
    assert said(spoken) == [(2, "gate", "Okay, muting now.")]


# -- confirm_silent: a turn that said nothing ----------------------------------------------------------------


def result(name: str, status: EventStatus, arguments: dict) -> EventResult:
    return EventResult(event_id=f"ev_{name}", name=name, status=status, policy=ResultPolicy.SILENT_SUCCESS,
                       arguments=arguments, resolution=None)


def test_a_silent_turn_confirms_only_what_succeeded_in_the_childs_language():
    """Guards `status is SUCCEEDED and …` (not `or`), the `locale` key and `Speech(1, …, kind="gate"/"fault")`."""
    gate = builtin_gate()
    spoken: list[Speech] = []
    gate.confirm_silent(turn("静音", Batch(gate.registry), spoken),
                        [result(VOLUME, EventStatus.SUCCEEDED, {"mode": "mute"})], FAULT)
    assert said(spoken) == [(1, "gate", "好的，静音了。")]
    spoken = []
    gate.confirm_silent(turn("mute", Batch(gate.registry), spoken),
                        [result(VOLUME, EventStatus.FAILED, {"mode": "mute"})], FAULT)
    assert said(spoken) == [(1, "fault", FAULT)]


# -- compounds: when every clause is clear --------------------------------------------------------------------


def test_a_chain_of_exactly_the_most_clauses_a_request_has_is_still_covered():
    """Guards `2 <= len(parts) <= MAX_CLAUSES` in `covers` (4 clauses)."""
    assert builtin_gate().covers(ctx("mute, bye, bye, bye"))


SCHEMA_N = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
            "required": ["n"], "additionalProperties": False}


def _digit(text: str) -> int | None:
    return next((int(c) for c in text if c.isdigit()), None)


def proposal_first(proposed, context):
    """The proposal wins; else the first digit of the words; else n is missing."""
    if proposed and "n" in proposed:
        return Resolution(arguments={"n": int(proposed["n"])})
    n = _digit(context.utterance)
    return Resolution(arguments={"n": n}) if n is not None else Resolution(arguments={}, missing=("n",))


def words_first(proposed, context):
    """The words win (like the volume resolver): the first digit of the utterance, else the proposal."""
    n = _digit(context.utterance)
    if n is not None:
        return Resolution(arguments={"n": n})
    return proposal_first(proposed, context)


def test_gate(resolver) -> OfflineGate:
    """A registry of two test events: "pick N" (resolved by `resolver`) and a terminal "bye"."""
    pick = EventDefinition(name="test.pick", version=1, tool_name="pick", description="pick a number",
                           schema=SCHEMA_N, resolver=resolver, handler=None, result_policy=ResultPolicy.SILENT_SUCCESS,
                           gate_match=lambda c: "pick" in c.utterance,
                           gate_reply=lambda args, c: f"Picked {args['n']}.")
    bye = EventDefinition(name="test.bye", version=1, tool_name="bye", description="say goodbye",
                          schema={"type": "object", "properties": {}, "additionalProperties": False},
                          resolver=lambda proposed, c: Resolution(arguments={}), handler=None,
                          result_policy=ResultPolicy.SILENT_SUCCESS, terminal=True,
                          gate_match=lambda c: "bye" in c.utterance, gate_reply=lambda args, c: "Bye!")
    return OfflineGate(EventRegistry([pick, bye]), NullAudit())


test_gate.__test__ = False  # a factory, not a test


def plan(gate: OfflineGate, utterance: str) -> list[tuple[str, dict | None]]:
    return [(s.definition.name, dict(s.arguments) if s.arguments is not None else None)
            for s in gate.plan(ctx(utterance))]


def test_a_clause_that_matches_but_does_not_resolve_leaves_the_compound_to_the_model():
    """Guards `if step is None or …` (`and` let an unresolved clause into the plan)."""
    # (plan() then falls back to the definitions that match the whole utterance; covers() reads the compound alone)
    assert not test_gate(proposal_first).covers(ctx("pick, then bye"))


def test_a_clause_is_read_back_from_the_whole_utterance_with_its_own_arguments():
    """Guards `resolve_deterministic(…, arguments or None, whole)`: without the clause's arguments the whole
    utterance's first digit (the 2 of "bye at 2") would be read instead of the clause's 7."""
    gate = test_gate(proposal_first)
    assert plan(gate, "bye at 2, then pick 7") == [("test.bye", {}), ("test.pick", {"n": 7})]
    assert gate.covers(ctx("bye at 2, then pick 7"))
    spoken: list[Speech] = []
    gate.answer(turn("bye at 2, then pick 7", Batch(gate.registry), spoken), OFFLINE)
    # guards `_reply`'s `step.arguments or None`: the line says what will run
    assert [s.text for s in spoken] == ["Bye!", "Picked 7."]


def test_a_clause_the_whole_utterance_reads_differently_leaves_the_compound_to_the_model():
    """Guards `again.outcome != "resolved" or dict(again.arguments) != arguments` (`and` accepted a clause whose
    words, read whole, run something else than the line would say)."""
    assert not test_gate(words_first).covers(ctx("bye at 2, then pick 7"))
    assert plan(test_gate(words_first), "pick 7, then bye") == [("test.pick", {"n": 7}), ("test.bye", {})]
