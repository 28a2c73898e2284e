"""The kernel's half of confirmation: it asks (in the child's language, never naming the event) instead of running,
and a request the child already said yes to runs with exactly those arguments, without being asked or resolved again.
Generic test definitions only: the kernel cannot special-case them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from toy_runtime.events import EventRequest, EventStatus, SourceProtocol
from toy_runtime.events.kernel import CONFIRMATION_QUESTIONS

from .conftest import kernel_for, make_definition


@pytest.mark.parametrize("locale", ["en", "zh"])
async def test_the_generic_question_is_in_the_childs_language_and_never_names_the_event(recorder, context, locale):
    risky = make_definition("test.risky.thing", "risky_thing", recorder.handler("risky"), requires_confirmation=True)
    kernel = kernel_for(risky)
    run = kernel.open_batch("s", "t1", replace(context, locale=locale))
    run.add(EventRequest(name="test.risky.thing", turn_id="t1", source=SourceProtocol.TOOL_CALLS, arguments={"n": 2}))
    run.close()
    outcome = await run.wait()
    [result] = outcome.results
    assert result.status is EventStatus.NEEDS_CONFIRMATION and recorder.calls == []
    assert result.question == CONFIRMATION_QUESTIONS[locale]
    assert "risky" not in result.question and "test." not in result.question
    assert outcome.continuation.lines == (CONFIRMATION_QUESTIONS[locale],)


async def test_a_confirmed_request_runs_with_the_confirmed_arguments_without_asking_again(recorder, context):
    risky = make_definition("test.risky.thing", "risky_thing", recorder.handler("risky"), requires_confirmation=True,
                            confirmation_question=lambda args, info: f"Really {args['n']}?")
    kernel = kernel_for(risky)
    # this turn's words ("yes 7") would resolve to n=7: the yes is to n=2, and n=2 is what runs
    run = kernel.open_batch("s", "t2", replace(context, utterance="yes 7"))
    run.add(EventRequest(name="test.risky.thing", turn_id="t2", source=SourceProtocol.OFFLINE_GATE,
                         arguments={"n": 2}), confirmed={"n": 2})
    run.close()
    outcome = await run.wait()
    [result] = outcome.results
    assert result.status is EventStatus.SUCCEEDED and result.arguments == {"n": 2}
    assert [call[:2] for call in recorder.calls] == [("risky", {"n": 2})]
    assert outcome.continuation.lines == ()  # no question a second time
