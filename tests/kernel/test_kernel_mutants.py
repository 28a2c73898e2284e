"""Kernel behaviour pinned down by mutmut survivors (docs/testing-mutation.md): retries, limits, unknown names."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from toy_runtime.audit import MemoryAudit
from toy_runtime.events import EventFailure, EventRequest, EventStatus, SourceProtocol
from toy_runtime.audit.kinds import AuditKind
from toy_runtime.testing.virtual_time import virtual_time

from .conftest import kernel_for, make_definition


def counting_handler(error: Exception):
    calls = []

    async def handle(args, ctx):
        calls.append(dict(args))
        raise error

    return handle, calls


def request(name="test.alpha", n=3):
    return EventRequest(name=name, turn_id="t1", source=SourceProtocol.TOOL_CALLS, arguments={"n": n})


async def test_a_read_only_event_is_tried_exactly_one_plus_retries_times(context):
    """Guards `attempts = 1 + retries` and the failure text in EventKernel.execute (the `else 0` branch is
    unreachable: EventDefinition refuses retries on an event that is not read-only)."""
    handle, calls = counting_handler(ValueError("boom"))
    a = make_definition("test.alpha", "alpha", handle, read_only=True, retries=2)
    run = kernel_for(a).open_batch("s1", "t1", context)
    assert run.add(request()) is True
    run.close()
    r = (await run.wait()).results[0]
    assert len(calls) == 3
    assert r.status is EventStatus.FAILED and r.error_code == "handler_error" and r.error == "ValueError: boom"


async def test_a_non_transient_failure_is_not_retried(context):
    """Guards the `break` on a non-transient EventFailure: a read-only event that failed for good is not re-run."""
    handle, calls = counting_handler(EventFailure("no_such_city", "unknown city"))
    a = make_definition("test.alpha", "alpha", handle, read_only=True, retries=2)
    run = kernel_for(a).open_batch("s1", "t1", context)
    run.add(request())
    run.close()
    r = (await run.wait()).results[0]
    assert len(calls) == 1 and r.error_code == "no_such_city"


async def test_an_unknown_name_is_refused_and_never_runs(context, recorder):
    """Guards BatchRun.add's `return False` for an unknown name (callers use it to say "that did not happen")."""
    a = make_definition("test.alpha", "alpha", recorder.handler("a"))
    run = kernel_for(a).open_batch("s1", "t1", context)
    assert run.add(request("test.nope")) is False
    run.close()
    outcome = await run.wait()
    assert tuple(outcome.dropped) == ("test.nope",) and list(outcome.results) == []
    assert recorder.calls == []


def test_max_concurrency_one_is_allowed_and_zero_is_refused():
    """Guards the `max_concurrency < 1` check in EventKernel.__init__."""
    assert kernel_for(max_concurrency=1).max_concurrency == 1
    with pytest.raises(ValueError, match="max_concurrency"):
        kernel_for(max_concurrency=0)


async def test_an_event_that_is_not_read_only_is_tried_once(context):
    """Guards `else 0` in `attempts = 1 + (retries if read_only else 0)`: an action with side effects (a volume
    change, a reminder) never runs a second time after a failure, whatever its retries say."""
    handle, calls = counting_handler(ValueError("boom"))
    a = make_definition("test.alpha", "alpha", handle, read_only=False)
    run = kernel_for(a).open_batch("s1", "t1", context)
    run.add(request())
    run.close()
    r = (await run.wait()).results[0]
    assert len(calls) == 1 and r.status is EventStatus.FAILED


@pytest.mark.parametrize("locale, words", [("en", ("yes", "no")), ("zh", ("好", "不要"))])
async def test_the_generic_confirmation_question_is_said_word_for_word(context, recorder, locale, words):
    """Guards the text of CONFIRMATION_QUESTIONS: what the child hears, in their language, offering exactly the
    answers session/answers.py understands."""
    from dataclasses import replace

    from toy_runtime.session.answers import read_answer

    expected = {"en": "Are you sure? Say yes or no.", "zh": "确定吗？请说好或者不要。"}[locale]
    risky = make_definition("test.risky", "risky", recorder.handler("risky"), requires_confirmation=True)
    run = kernel_for(risky).open_batch("s1", "t1", replace(context, locale=locale))
    run.add(request("test.risky"))
    run.close()
    [result] = (await run.wait()).results
    assert result.question == expected
    yes, no = words
    assert read_answer(yes) is not None and read_answer(no) is not None and read_answer(yes) != read_answer(no)


async def test_a_batch_outcome_cannot_be_changed_after_the_fact(context, recorder):
    """Guards `@dataclass(frozen=True)` on BatchOutcome: the turn, the audit and the metrics read one outcome; none
    of them may rewrite what happened for the others."""
    import dataclasses

    a = make_definition("test.alpha", "alpha", recorder.handler("a"))
    run = kernel_for(a).open_batch("s1", "t1", context)
    run.add(request())
    run.close()
    outcome = await run.wait()
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.results = ()


def test_the_kernels_defaults_are_the_configs():
    """Guards EventKernel's keyword defaults: a kernel built without them behaves as the documented [events]
    defaults say (a test or tool that builds one bare must not get other limits than the toy)."""
    from toy_runtime.config import EventsConfig

    kernel = kernel_for()
    defaults = EventsConfig()
    assert kernel.max_concurrency == defaults.max_concurrency
    assert kernel.batch_deadline_s == defaults.batch_deadline_s
    assert kernel.terminal_barrier_s == defaults.terminal_barrier_s


def test_a_bad_concurrency_is_refused_with_its_reason():
    """Guards the ValueError's text: the owner reads which limit is wrong."""
    with pytest.raises(ValueError) as refused:
        kernel_for(max_concurrency=0)
    assert str(refused.value) == "max_concurrency must be ≥ 1"


@virtual_time
async def test_a_timed_out_event_says_its_limit(context, recorder):
    """Guards the timeout's error text: the audit says which limit ran out."""
    hang = make_definition("test.alpha", "alpha", recorder.handler("hang", delay=5), timeout_s=0.25)
    run = kernel_for(hang).open_batch("s1", "t1", context)
    run.add(request())
    run.close()
    r = (await run.wait()).results[0]
    assert r.status is EventStatus.TIMED_OUT and r.error == "timed out after 0.25s"


async def test_each_failed_attempt_is_audited_with_its_number(context):
    """Guards `attempt + 1` in the attempt audit: the owner reads "attempt 1 of 3", "2 of 3", "3 of 3"."""
    audit = MemoryAudit()
    handle, _ = counting_handler(ValueError("boom"))
    a = make_definition("test.alpha", "alpha", handle, read_only=True, retries=2)
    run = kernel_for(a, audit=audit).open_batch("s1", "t1", context)
    run.add(request())
    run.close()
    await run.wait()
    failed = audit.of(AuditKind.EVENT_ATTEMPT_FAILED)
    assert [(r["attempt"], r["of"]) for r in failed] == [(1, 3), (2, 3), (3, 3)]


async def test_a_provider_tool_name_runs_and_is_audited_as_the_event(context):
    """Guards the tool-name mapping, the batch's turn id in the audit and the event task's name: a request named
    by its provider tool name ("alpha") is the namespaced event everywhere."""
    names = []

    async def handle(args, ctx):
        names.append(asyncio.current_task().get_name())
        return {}

    audit = MemoryAudit()
    a = make_definition("test.alpha", "alpha", handle)
    run = kernel_for(a, audit=audit).open_batch("s1", "turn-7", context)
    asked = request("alpha")
    run.add(asked)
    assert run.add(request("test.nope")) is False
    run.close()
    [r] = (await run.wait()).results
    assert r.status is EventStatus.SUCCEEDED and r.name == "test.alpha"
    assert names == [f"event:test.alpha:{asked.event_id}"]
    [detected] = audit.of(AuditKind.EVENT_DETECTED)
    assert (detected["name"], detected["turn_id"]) == ("test.alpha", "turn-7")
    [dropped] = audit.of(AuditKind.EVENT_DROPPED)
    assert (dropped["reason"], dropped["turn_id"]) == ("unknown_event", "turn-7")


async def test_adding_to_a_closed_batch_says_so(context, recorder):
    """Guards the RuntimeError's text: a caller's bug names itself."""
    run = kernel_for(make_definition("test.alpha", "alpha", recorder.handler("a"))).open_batch("s1", "t1", context)
    run.close()
    with pytest.raises(RuntimeError, match="^batch already closed$"):
        run.add(request())
    await run.wait()


async def test_a_kernel_failure_for_one_event_is_its_result(context, recorder):
    """Guards the internal-error result: a failing idempotency store fails that event, with the code and text."""
    from toy_runtime.events.idempotency import IdempotencyStore

    class BrokenStore(IdempotencyStore):
        async def claim(self, key):
            raise RuntimeError("disk gone")

    a = make_definition("test.alpha", "alpha", recorder.handler("a"))
    run = kernel_for(a, idempotency=BrokenStore()).open_batch("s1", "t1", context)
    run.add(request())
    run.close()
    [r] = (await run.wait()).results
    assert (r.status, r.error_code, r.error) == (EventStatus.FAILED, "internal_error", "internal error: disk gone")
    assert recorder.calls == []


async def test_a_clarification_names_every_missing_argument_and_ran_nothing(context, recorder):
    """Guards the clarification result: its code, "missing or ambiguous: a, b", and zero queued/execute time."""
    from toy_runtime.events import Resolution

    def two_missing(proposed, ctx):
        return Resolution(arguments={}, missing=("n", "m"), question="Which ones?")

    a = make_definition("test.alpha", "alpha", recorder.handler("a"))
    a = dataclasses.replace(a, resolver=two_missing)
    run = kernel_for(a).open_batch("s1", "t1", context)
    run.add(request())
    run.close()
    [r] = (await run.wait()).results
    assert (r.status, r.error_code) == (EventStatus.NEEDS_CLARIFICATION, "needs_clarification")
    assert r.error == "missing or ambiguous: n, m" and r.question == "Which ones?"
    assert (r.timings.queued_ms, r.timings.execute_ms) == (0.0, 0.0) and recorder.calls == []


async def test_an_unasked_request_says_why_it_was_refused(context, recorder):
    """Guards the NOT_ASKED result's text."""
    a = make_definition("test.alpha", "alpha", recorder.handler("a"), supports=lambda args, ctx: False)
    run = kernel_for(a).open_batch("s1", "t1", context)
    run.add(request())
    run.close()
    [r] = (await run.wait()).results
    assert r.status is EventStatus.REJECTED and r.error == "the child's words do not ask for this"


async def test_a_definitions_question_is_asked_in_the_childs_language(context, recorder):
    """Guards the locale passed to a confirmation template and the needs_confirmation code."""
    questions = {"en": "Really turn it off?", "zh": "真的要关掉吗？"}
    a = make_definition("test.alpha", "alpha", recorder.handler("a"), requires_confirmation=True,
                        confirmation_question=lambda args, ctx: questions[ctx["locale"]])
    run = kernel_for(a).open_batch("s1", "t1", dataclasses.replace(context, locale="zh"))
    run.add(request())
    run.close()
    [r] = (await run.wait()).results
    assert (r.status, r.error_code, r.question) == (EventStatus.NEEDS_CONFIRMATION, "needs_confirmation",
                                                     "真的要关掉吗？")


async def test_an_invalid_gate_request_does_not_swallow_the_models(context, recorder):
    """Guards `theirs is None or theirs.outcome != "resolved"`: only a gate request that resolved settles the
    definition for the batch; one that was invalid leaves the model's request to run."""
    a = make_definition("test.alpha", "alpha", recorder.handler("a"))
    run = kernel_for(a).open_batch("s1", "t1", context)
    gate = EventRequest(name="test.alpha", turn_id="t1", source=SourceProtocol.OFFLINE_GATE, arguments={"n": "x"})
    run.add(gate)
    run.add(request())
    run.close()
    invalid, model = (await run.wait()).results
    assert invalid.status is EventStatus.REJECTED and model.status is EventStatus.SUCCEEDED


async def test_a_duplicate_is_found_past_an_earlier_invalid_request(context, recorder):
    """Guards `continue` (not `break`) after an unresolved earlier request, and a confirmed request counting as
    resolved: the third request duplicates the second, the fifth the confirmed fourth."""
    a = make_definition("test.alpha", "alpha", recorder.handler("a"))
    run = kernel_for(a).open_batch("s1", "t1", context)
    bad, first, again = request(n="x"), request(), request()
    run.add(bad)
    run.add(first)
    run.add(again)
    yes, model = request(n=5), request(n=5)
    run.add(yes, confirmed={"n": 5})
    run.add(model)
    run.close()
    results = (await run.wait()).results
    assert [r.status for r in results] == [EventStatus.REJECTED, EventStatus.SUCCEEDED,
                                           EventStatus.SKIPPED_DUPLICATE, EventStatus.SUCCEEDED,
                                           EventStatus.SKIPPED_DUPLICATE]
    assert results[2].result == {"duplicate_of": first.event_id} and results[4].result == {"duplicate_of": yes.event_id}
