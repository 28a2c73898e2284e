"""Kernel behaviour pinned down by mutmut survivors (docs/testing-mutation.md): retries, limits, unknown names."""

from __future__ import annotations

import pytest

from toy_runtime.events import EventFailure, EventRequest, EventStatus, SourceProtocol

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
