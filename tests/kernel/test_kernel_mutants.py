"""Kernel behaviour pinned down by mutmut survivors (docs/testing-mutation.md): retries, limits, unknown names."""

from __future__ import annotations

import pytest

from toy_runtime.events import EventFailure, EventRequest, EventStatus, SourceProtocol
from toy_runtime.testing.virtual_time import virtual_time

from .conftest import kernel_for, make_definition


def counting_handler(error: Exception):
    calls = []

    async def handle(args, ctx):
        calls.append(dict(args))
        raise error

    return handle, calls


def request(name="test.alpha"):
    return EventRequest(name=name, turn_id="t1", source=SourceProtocol.TOOL_CALLS, arguments={"n": 3})


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
